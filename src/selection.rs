//! Numpy-style selections: one type, [`Selection`], from every client to the engine.
//!
//! A client builds a selection from per-axis [`Item`]s: parsed from text on the command line
//! (`10:20`, `::2`, `5`, `-1`, `2:8:3,::-1`, `...`), converted from a Python key by the
//! Python binding, or from ndarray's `s![]` for Rust users. [`Selection::resolve`] checks it
//! against a shape, once, and gives the engine's per-axis [`AxisSel`]s and the result's shape
//! ([`Resolved`]); it is the one place where selections are bounds-checked.
//!
//! Semantics are numpy's: an integer picks one position (negative counts from the end, and
//! must lie inside the axis); a slice `start:stop:step` is clamped to the axis like Python's
//! `slice.indices`, and a negative step walks backwards from `start` (default: the last
//! position); `...` stands for the axes not named; a new axis (`None` in numpy) adds an axis
//! of extent 1 to the result. ndarray's ranges (`a..b;-k`, from `s![]`) keep ndarray's
//! meaning ([`Item::Range`]): bounds must lie in the axis, and a negative step walks from
//! `b - 1` backwards.

use crate::error::{Error, Result};
use ndarray::SliceInfoElem;
use std::path::Path;

/// One axis of a resolved selection: `count` indices `start, start + step, ...` (ascending),
/// delivered in reverse when `reversed`, and dropped from the output shape when `!keep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AxisSel {
    /// First index (the smallest).
    pub start: u64,
    /// Distance between indices (at least 1).
    pub step: u64,
    /// Number of indices.
    pub count: u64,
    /// Deliver the indices largest first.
    pub reversed: bool,
    /// Keep the axis in the output (false for a single index).
    pub keep: bool,
}

impl AxisSel {
    /// Every index of an axis of extent `n`.
    pub fn full(n: u64) -> AxisSel {
        AxisSel {
            start: 0,
            step: 1,
            count: n,
            reversed: false,
            keep: true,
        }
    }

    /// The last index selected (requires `count > 0`).
    pub fn last(&self) -> u64 {
        self.start + (self.count - 1) * self.step
    }

    /// `count` positions from `first` (the first visited) by `step` (not 0; negative walks
    /// backwards), each of which lies in the axis.
    fn walk(first: i128, step: i128, count: i128) -> AxisSel {
        if count <= 0 {
            return AxisSel {
                start: 0,
                step: 1,
                count: 0,
                reversed: false,
                keep: true,
            };
        }
        // Positions are in 0..n and n fits a u64: so do the first and the last.
        let last = first + (count - 1) * step;
        AxisSel {
            start: first.min(last) as u64,
            // A step longer than the axis selects one position: any step will do.
            step: if count == 1 {
                1
            } else {
                step.unsigned_abs() as u64
            },
            count: count as u64,
            reversed: step < 0 && count > 1,
            keep: true,
        }
    }
}

/// A selection resolved against a shape by [`Selection::resolve`]: what the engine reads or
/// writes, and the shape of the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// One per axis of the dataset: the positions selected on it.
    pub axes: Vec<AxisSel>,
    /// The result's shape: the count of each kept axis, and 1 for each new axis, in the
    /// order of the selection's items.
    pub shape: Vec<u64>,
    /// Where the new axes are in [`shape`](Resolved::shape) (ascending).
    pub new_axes: Vec<usize>,
}

impl Resolved {
    /// The count of every axis of the dataset: the shape of the buffer a read fills (and a
    /// write takes), before reversed axes are turned round and single indices dropped.
    pub fn counts(&self) -> Vec<u64> {
        self.axes.iter().map(|s| s.count).collect()
    }

    /// Number of elements selected.
    pub fn elements(&self) -> u64 {
        self.axes.iter().map(|s| s.count).product()
    }
}

/// Resolves ndarray slice elements (as produced by `ndarray::s![]`) against `shape`, with
/// ndarray's meaning (see [`Item::Range`]). Missing trailing axes are taken whole.
///
/// # Errors
/// As [`Selection::resolve`]; and [`Error::InvalidArgument`] for a `NewAxis`, which has no
/// place in a list of [`AxisSel`] (use [`Selection::resolve`] for the result's shape).
pub fn resolve(sel: &[SliceInfoElem], shape: &[u64], dataset: &Path) -> Result<Vec<AxisSel>> {
    let r = Selection::from(sel).resolve(shape, dataset)?;
    if !r.new_axes.is_empty() {
        return Err(Error::InvalidArgument(
            "new axes are not supported in this selection (use Selection::resolve)".into(),
        ));
    }
    Ok(r.axes)
}

/// A numpy-style selection: a list of per-axis [`Item`]s. Build one by
/// [`parse`](Selection::parse), from items ([`Selection::new`]), or from ndarray's `s![]`
/// (`Selection::from(s![..;2, 1])`); [`resolve`](Selection::resolve) it against a shape.
///
/// ```
/// use blz::selection::{Item, Selection};
/// let sel = blz::Selection::parse("2:8:3, ::-1")?;
/// let r = sel.resolve(&[10, 4], std::path::Path::new("d.blz"))?;
/// // numpy's 2:8:3 is positions 2 and 5.
/// assert_eq!((r.axes[0].start, r.axes[0].step, r.axes[0].count), (2, 3, 2));
/// // ::-1 walks the axis of 4 backwards.
/// assert!(r.axes[1].reversed);
/// assert_eq!(r.shape, [2, 4]);
/// // An index drops its axis; a new axis adds one of extent 1.
/// let sel = Selection::new(vec![Item::Index(-1), Item::NewAxis]);
/// assert_eq!(sel.resolve(&[10, 4], std::path::Path::new("d.blz"))?.shape, [1, 4]);
/// assert!(blz::Selection::parse("1:x").is_err());
/// # Ok::<(), blz::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    items: Vec<Item>,
}

impl Selection {
    /// A selection of these items, in axis order.
    pub fn new(items: Vec<Item>) -> Selection {
        Selection { items }
    }

    /// Parses a selection such as `10:20`, `::2`, `-1`, `2:8:3,::-1` or `...,0` (numpy's
    /// brackets are tolerated). An empty string selects everything.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the item that is not an integer, a slice or `...`.
    pub fn parse(text: &str) -> Result<Selection> {
        parse(text)
            .map(|items| Selection { items })
            .map_err(Error::InvalidArgument)
    }

    /// The items, in order.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// Whether an item is `...` (numpy then gives an array, never a scalar).
    pub fn has_ellipsis(&self) -> bool {
        self.items.contains(&Item::Ellipsis)
    }

    /// Resolves the selection against `shape`: the one place where a selection is checked.
    /// Missing trailing axes are taken whole.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] (naming `dataset`) for an index outside its axis, an ndarray
    /// range outside its axis, or more indices than axes ("too many indices");
    /// [`Error::InvalidArgument`] for a zero step or more than one `...`.
    pub fn resolve(&self, shape: &[u64], dataset: &Path) -> Result<Resolved> {
        let oob = |reason: String| Error::OutOfBounds {
            dataset: dataset.to_path_buf(),
            reason,
        };
        if self.items.iter().filter(|i| **i == Item::Ellipsis).count() > 1 {
            return Err(Error::InvalidArgument(
                "a selection can only have a single ellipsis ('...')".into(),
            ));
        }
        let named = self.items.iter().filter(|i| i.names_an_axis()).count();
        if named > shape.len() {
            return Err(oob(format!(
                "too many indices: the selection has {named}, the dataset has {} axes",
                shape.len()
            )));
        }
        let whole = Item::Slice {
            start: None,
            stop: None,
            step: None,
        };
        let rest = shape.len() - named;
        let expanded = self.items.iter().flat_map(|it| match it {
            Item::Ellipsis => vec![whole; rest],
            it => vec![*it],
        });
        let trailing = if self.has_ellipsis() { 0 } else { rest };
        let mut out = Resolved {
            axes: Vec::with_capacity(shape.len()),
            shape: Vec::with_capacity(shape.len()),
            new_axes: Vec::new(),
        };
        for it in expanded.chain(std::iter::repeat_n(whole, trailing)) {
            if it == Item::NewAxis {
                out.new_axes.push(out.shape.len());
                out.shape.push(1);
                continue;
            }
            let axis = out.axes.len();
            // `named <= shape.len()`, so every item naming an axis has one.
            let Some(&n) = shape.get(axis) else {
                return Err(oob(format!("too many indices at axis {axis}")));
            };
            let s = resolve_item(it, axis, n).map_err(|e| match e {
                Bad::Bounds(reason) => oob(reason),
                Bad::Argument(m) => Error::InvalidArgument(m),
            })?;
            if s.keep {
                out.shape.push(s.count);
            }
            out.axes.push(s);
        }
        Ok(out)
    }

    /// The selection as ndarray slice elements for an array of `shape` (resolved, so that
    /// indices and ranges lie in their axes).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an index outside its axis, more items than axes, two
    /// `...`, or a zero step.
    pub fn to_slice_info(&self, shape: &[u64]) -> Result<Vec<SliceInfoElem>> {
        let r = self.resolve(shape, Path::new("")).map_err(|e| match e {
            Error::OutOfBounds { reason, .. } => Error::InvalidArgument(reason),
            e => e,
        })?;
        let big = |_| Error::InvalidArgument("axis too large".into());
        let mut out = Vec::with_capacity(r.axes.len() + r.new_axes.len());
        let mut new_axes = r.new_axes.iter().peekable();
        let mut dim = 0;
        for s in &r.axes {
            while new_axes.next_if(|&&k| k == dim).is_some() {
                out.push(SliceInfoElem::NewAxis);
                dim += 1;
            }
            let start = isize::try_from(s.start).map_err(big)?;
            if !s.keep {
                out.push(SliceInfoElem::Index(start));
                continue;
            }
            dim += 1;
            let end = if s.count == 0 {
                start
            } else {
                isize::try_from(s.last() + 1).map_err(big)?
            };
            let step = isize::try_from(s.step).map_err(big)?;
            out.push(SliceInfoElem::Slice {
                start,
                end: Some(end),
                // ndarray walks `start..end;-k` from end - 1 down: the last position here.
                step: if s.reversed { -step } else { step },
            });
        }
        out.extend(new_axes.map(|_| SliceInfoElem::NewAxis));
        Ok(out)
    }
}

impl From<&[SliceInfoElem]> for Selection {
    /// ndarray's elements: ranges keep ndarray's meaning ([`Item::Range`]).
    fn from(elems: &[SliceInfoElem]) -> Selection {
        let items = elems
            .iter()
            .map(|e| match *e {
                SliceInfoElem::Index(i) => Item::Index(i as i128),
                SliceInfoElem::Slice { start, end, step } => Item::Range {
                    start: start as i128,
                    end: end.map(|e| e as i128),
                    step: step as i128,
                },
                SliceInfoElem::NewAxis => Item::NewAxis,
            })
            .collect();
        Selection { items }
    }
}

impl From<Vec<Item>> for Selection {
    fn from(items: Vec<Item>) -> Selection {
        Selection { items }
    }
}

/// One per-axis item of a selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A single position (negative counts from the end); drops its axis from the result.
    Index(i128),
    /// numpy's `start:stop:step`, each part optional, clamped to the axis.
    Slice {
        /// First position (default: the start, or the end for a negative step).
        start: Option<i128>,
        /// Position to stop before.
        stop: Option<i128>,
        /// Distance between positions (default 1; never 0).
        step: Option<i128>,
    },
    /// `...`: as many whole axes as needed.
    Ellipsis,
    /// numpy's `None` (`numpy.newaxis`): a new axis of extent 1 in the result.
    NewAxis,
    /// ndarray's `start..end;step` (what `s![]` gives): `start..end` must lie in the axis
    /// (negative ends count from the end; an end before the start selects nothing), and a
    /// negative step walks from `end - 1` down.
    Range {
        /// First position of the range.
        start: i128,
        /// End of the range (default: the axis's extent).
        end: Option<i128>,
        /// Distance between positions (never 0; negative: from the end of the range).
        step: i128,
    },
}

impl Item {
    /// Whether the item stands for one axis of the dataset (not `...` nor a new axis).
    fn names_an_axis(&self) -> bool {
        !matches!(self, Item::Ellipsis | Item::NewAxis)
    }
}

/// Why an item does not fit its axis.
enum Bad {
    Bounds(String),
    Argument(String),
}

/// One item (not `...` nor a new axis) resolved against axis `axis` of extent `n`.
fn resolve_item(it: Item, axis: usize, n: u64) -> std::result::Result<AxisSel, Bad> {
    let n = i128::from(n);
    let norm = |i: i128| if i < 0 { i.saturating_add(n) } else { i };
    match it {
        Item::Index(i) => {
            let j = norm(i);
            if j < 0 || j >= n {
                return Err(Bad::Bounds(format!(
                    "index {i} out of range for axis {axis} of extent {n}"
                )));
            }
            Ok(AxisSel {
                start: j as u64,
                step: 1,
                count: 1,
                reversed: false,
                keep: false,
            })
        }
        Item::Slice { start, stop, step } => {
            let step = step.unwrap_or(1);
            if step == 0 {
                return Err(Bad::Argument(format!("step 0 on axis {axis}")));
            }
            let (first, count) = numpy_slice(start, stop, step, n);
            Ok(AxisSel::walk(first, step, count))
        }
        Item::Range { start, end, step } => {
            if step == 0 {
                return Err(Bad::Argument(format!("step 0 on axis {axis}")));
            }
            let (a, b) = (norm(start), end.map_or(n, norm));
            if a < 0 || a > n || b < 0 || b > n {
                return Err(Bad::Bounds(format!(
                    "range {start}..{} out of bounds for axis {axis} of extent {n}",
                    end.map_or(String::new(), |e| e.to_string())
                )));
            }
            let b = b.max(a);
            let k = step.saturating_abs();
            let count = if b > a { (b - a - 1) / k + 1 } else { 0 };
            Ok(if step > 0 {
                AxisSel::walk(a, k, count)
            } else {
                // ndarray: from the end of the range, walking back by |step|.
                AxisSel::walk(b - 1, -k, count)
            })
        }
        Item::Ellipsis | Item::NewAxis => Err(Bad::Argument(format!(
            "no position on axis {axis} for {it:?}"
        ))),
    }
}

fn int(s: &str, what: &str, item: &str) -> std::result::Result<Option<i128>, String> {
    let t = s.trim();
    if t.is_empty() {
        return Ok(None);
    }
    t.parse::<i128>()
        .map(Some)
        .map_err(|_| format!("bad selection item {item:?}: {what} {t:?} is not an integer"))
}

/// The items of a selection (see [`Selection::parse`]).
fn parse(text: &str) -> std::result::Result<Vec<Item>, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(Vec::new());
    }
    // Tolerate numpy's brackets: `[2:5, 1]`.
    let t = t
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(t);
    let mut out = Vec::new();
    for raw in t.split(',') {
        let item = raw.trim();
        if item.is_empty() {
            return Err(format!(
                "bad selection {text:?}: empty item (use ':' for a whole axis)"
            ));
        }
        if item == "..." {
            if out.contains(&Item::Ellipsis) {
                return Err(format!("bad selection {text:?}: more than one '...'"));
            }
            out.push(Item::Ellipsis);
            continue;
        }
        let parts: Vec<&str> = item.split(':').collect();
        match parts.as_slice() {
            [one] => {
                let i = int(one, "index", item)?
                    .ok_or_else(|| format!("bad selection item {item:?}"))?;
                out.push(Item::Index(i));
            }
            [a, b] => out.push(Item::Slice {
                start: int(a, "start", item)?,
                stop: int(b, "stop", item)?,
                step: None,
            }),
            [a, b, c] => {
                let step = int(c, "step", item)?;
                if step == Some(0) {
                    return Err(format!("bad selection item {item:?}: step cannot be zero"));
                }
                out.push(Item::Slice {
                    start: int(a, "start", item)?,
                    stop: int(b, "stop", item)?,
                    step,
                });
            }
            _ => {
                return Err(format!(
                    "bad selection item {item:?}: expected INDEX or START:STOP[:STEP]"
                ))
            }
        }
    }
    Ok(out)
}

/// Python's `slice(start, stop, step).indices(n)` followed by the count of positions:
/// returns (first, step, count).
fn numpy_slice(start: Option<i128>, stop: Option<i128>, step: i128, n: i128) -> (i128, i128) {
    let clamp = |v: i128, lo: i128, hi: i128| v.max(lo).min(hi);
    if step > 0 {
        let norm = |v: i128| clamp(if v < 0 { v + n } else { v }, 0, n);
        let a = start.map_or(0, norm);
        let b = stop.map_or(n, norm);
        let count = if b > a { (b - a - 1) / step + 1 } else { 0 };
        (a, count)
    } else {
        let norm = |v: i128| clamp(if v < 0 { v + n } else { v }, -1, n - 1);
        let a = start.map_or(n - 1, norm);
        let b = stop.map_or(-1, norm);
        let count = if a > b {
            (a - b - 1) / step.saturating_neg() + 1
        } else {
            0
        };
        (a, count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::s;
    use proptest::prelude::*;

    fn slice(start: Option<i128>, stop: Option<i128>, step: Option<i128>) -> Item {
        Item::Slice { start, stop, step }
    }

    fn at(items: Vec<Item>, shape: &[u64]) -> Result<Resolved> {
        Selection::new(items).resolve(shape, Path::new("d"))
    }

    /// The positions an axis selection delivers, in output order.
    fn delivered(s: &AxisSel) -> Vec<i128> {
        let mut v: Vec<i128> = (0..s.count)
            .map(|k| i128::from(s.start + k * s.step))
            .collect();
        if s.reversed {
            v.reverse();
        }
        v
    }

    #[test]
    fn resolve_like_ndarray() {
        let p = Path::new("d");
        let shape = [10u64, 7];
        let r = resolve(s![2..9;3, -1].as_ref(), &shape, p).unwrap();
        assert_eq!(
            r[0],
            AxisSel {
                start: 2,
                step: 3,
                count: 3,
                reversed: false,
                keep: true
            }
        );
        assert_eq!((r[1].start, r[1].count, r[1].keep), (6, 1, false));
        let r = resolve(s![0..10;-3, ..].as_ref(), &shape, p).unwrap();
        // ndarray gives 9, 6, 3, 0
        assert_eq!(
            (r[0].start, r[0].step, r[0].count, r[0].reversed),
            (0, 3, 4, true)
        );
        assert!(matches!(
            resolve(s![10, ..].as_ref(), &shape, p),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(matches!(
            resolve(s![0..11, ..].as_ref(), &shape, p),
            Err(Error::OutOfBounds { .. })
        ));
        let empty = [SliceInfoElem::Slice {
            start: 5,
            end: Some(2),
            step: 1,
        }];
        assert_eq!(resolve(&empty, &shape, p).unwrap()[0].count, 0);
        assert!(resolve(s![.., .., ..].as_ref(), &shape, p).is_err());
        assert!(resolve(s![ndarray::NewAxis, ..].as_ref(), &shape, p).is_err());
        // Every ndarray slice of an axis, against ndarray itself.
        let n = 9usize;
        let a = ndarray::Array1::from_iter(0..n as i128);
        for start in -9isize..=9 {
            for end in (-9isize..=9).map(Some).chain([None]) {
                for step in [-4isize, -1, 1, 3] {
                    let e = [SliceInfoElem::Slice { start, end, step }];
                    let r = resolve(&e, &[n as u64], p).unwrap();
                    let want = a.slice(s![ndarray::Slice::new(start, end, step)]).to_vec();
                    assert_eq!(delivered(&r[0]), want, "{start}..{end:?};{step}");
                }
            }
        }
    }

    /// The positions numpy selects on one axis of extent n, computed the slow way.
    fn positions(start: Option<i128>, stop: Option<i128>, step: i128, n: i128) -> Vec<i128> {
        let (a, count) = numpy_slice(start, stop, step, n);
        (0..count).map(|k| a + k * step).collect()
    }

    #[test]
    fn python_semantics() {
        // Expected values from Python's list(range(10))[...].
        assert_eq!(positions(Some(2), Some(8), 3, 10), vec![2, 5]);
        assert_eq!(
            positions(None, None, -1, 10),
            (0..10).rev().collect::<Vec<_>>()
        );
        assert_eq!(positions(Some(8), Some(2), -2, 10), vec![8, 6, 4]);
        assert_eq!(positions(Some(-3), None, 1, 10), vec![7, 8, 9]);
        assert_eq!(positions(Some(5), Some(100), 2, 10), vec![5, 7, 9]);
        assert_eq!(positions(Some(100), None, -3, 10), vec![9, 6, 3, 0]);
        assert_eq!(
            positions(None, Some(-100), -1, 10),
            (0..10).rev().collect::<Vec<_>>()
        );
        assert!(positions(Some(5), Some(3), 1, 10).is_empty());
        assert!(positions(Some(3), Some(5), -1, 10).is_empty());
        assert!(positions(None, None, 1, 0).is_empty());
        assert!(positions(None, None, -1, 0).is_empty());
    }

    #[test]
    fn hand_computed() {
        // numpy: np.zeros((10, 4, 3))[1, ..., None, ::-2].shape == (4, 1, 2)
        let r = at(
            vec![
                Item::Index(1),
                Item::Ellipsis,
                Item::NewAxis,
                slice(None, None, Some(-2)),
            ],
            &[10, 4, 3],
        )
        .unwrap();
        assert_eq!(r.shape, [4, 1, 2]);
        assert_eq!(r.new_axes, [1]);
        assert_eq!(r.counts(), [1, 4, 2]);
        assert_eq!(delivered(&r.axes[2]), [2, 0]);
        assert_eq!((r.axes[0].start, r.axes[0].keep), (1, false));
        // Missing trailing axes are whole; new axes before and after.
        let r = at(
            vec![Item::NewAxis, Item::Index(-10), Item::NewAxis],
            &[10, 4],
        )
        .unwrap();
        assert_eq!(r.shape, [1, 1, 4]);
        assert_eq!(r.new_axes, [0, 1]);
        assert_eq!(r.axes[0].start, 0);
        // An ellipsis that stands for no axis, and none at all.
        let r = at(
            vec![Item::Index(2), Item::Ellipsis, Item::Index(3)],
            &[10, 4],
        )
        .unwrap();
        assert!(r.shape.is_empty() && r.elements() == 1);
        assert_eq!(at(vec![], &[10, 4]).unwrap().shape, [10, 4]);
        assert_eq!(at(vec![Item::NewAxis], &[3]).unwrap().shape, [1, 3]);
        // Huge steps and bounds (Python ints beyond i64) clamp as Python does.
        let big = i128::MAX;
        let r = at(vec![slice(Some(-big), Some(big), Some(big))], &[10]).unwrap();
        assert_eq!((r.axes[0].start, r.axes[0].count), (0, 1));
        let r = at(vec![slice(None, None, Some(i128::MIN))], &[10]).unwrap();
        assert_eq!(delivered(&r.axes[0]), [9]);
        // Empty selections.
        let r = at(vec![slice(Some(7), Some(2), None)], &[10]).unwrap();
        assert_eq!((r.shape.as_slice(), r.elements()), ([0u64].as_slice(), 0));
    }

    #[test]
    fn errors_in_one_place() {
        let oob = |items, shape: &[u64]| matches!(at(items, shape), Err(Error::OutOfBounds { .. }));
        assert!(oob(vec![Item::Index(10)], &[10]));
        assert!(oob(vec![Item::Index(-11)], &[10]));
        assert!(oob(vec![Item::Index(i128::MIN)], &[10]));
        assert!(oob(vec![Item::Index(0)], &[0]));
        assert!(oob(vec![Item::Index(0), Item::Index(0)], &[10]));
        assert!(oob(
            vec![Item::Index(0), Item::Ellipsis, Item::Index(0)],
            &[10]
        ));
        let e = at(vec![Item::Index(0), Item::Index(0)], &[10]).unwrap_err();
        assert!(e.to_string().contains("too many indices"), "{e}");
        let e = at(vec![Item::Index(10)], &[10]).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        // New axes do not count as indices.
        assert!(at(vec![Item::NewAxis, Item::Index(0), Item::NewAxis], &[10]).is_ok());
        let bad = |items| matches!(at(items, &[10, 4]), Err(Error::InvalidArgument(_)));
        assert!(bad(vec![slice(None, None, Some(0))]));
        assert!(bad(vec![Item::Ellipsis, Item::Ellipsis]));
        assert!(bad(vec![Item::Range {
            start: 0,
            end: None,
            step: 0
        }]));
    }

    #[test]
    fn slice_info_round_trip() {
        let shape = [13u64, 5];
        let ends = [
            None,
            Some(-20),
            Some(-5),
            Some(-1),
            Some(0),
            Some(3),
            Some(12),
            Some(40),
        ];
        let huge = 10i128.pow(30);
        let data = ndarray::Array2::from_shape_fn((13, 5), |(i, j)| (i * 5 + j) as i64).into_dyn();
        for step in [-huge, -4i128, -1, 1, 2, 5, huge] {
            for &a in &ends {
                for &b in &ends {
                    let sel = Selection::new(vec![slice(a, b, Some(step)), Item::Index(-1)]);
                    let info = sel.to_slice_info(&shape).unwrap();
                    let got: Vec<i64> = data.slice(info.as_slice()).iter().copied().collect();
                    let want: Vec<i64> = positions(a, b, step, 13)
                        .into_iter()
                        .map(|i| i as i64 * 5 + 4)
                        .collect();
                    assert_eq!(got, want, "{a:?}:{b:?}:{step}");
                    // ndarray's elements resolve to the same axes.
                    let back = Selection::from(info.as_slice())
                        .resolve(&shape, Path::new("d"))
                        .unwrap();
                    assert_eq!(back, sel.resolve(&shape, Path::new("d")).unwrap());
                }
            }
        }
        let info = Selection::new(vec![Item::NewAxis, Item::Index(1), Item::NewAxis])
            .to_slice_info(&shape)
            .unwrap();
        assert_eq!(data.slice(info.as_slice()).shape(), [1, 1, 5]);
    }

    #[test]
    fn parsing() {
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("5").unwrap(), vec![Item::Index(5)]);
        assert_eq!(
            parse(" 2:8:3 , ::-1 ").unwrap(),
            vec![
                slice(Some(2), Some(8), Some(3)),
                slice(None, None, Some(-1))
            ]
        );
        assert_eq!(
            parse("[...,-1]").unwrap(),
            vec![Item::Ellipsis, Item::Index(-1)]
        );
        for bad in ["1:2:0", "a", "1:2:3:4", "1,,2", "...,...", "1.5", ":x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let e = Selection::parse("...,1")
            .unwrap()
            .to_slice_info(&[4, 5, 6])
            .unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[2], SliceInfoElem::Index(1));
        assert!(Selection::parse("1,2")
            .unwrap()
            .to_slice_info(&[4])
            .is_err());
    }

    /// A numpy-style item on one axis, the way a test writes it.
    #[derive(Debug, Clone)]
    enum Key {
        Int(i128),
        Slice(Option<i128>, Option<i128>, Option<i128>),
        Ellipsis,
        NewAxis,
    }

    fn key() -> impl Strategy<Value = Key> {
        let bound = prop_oneof![Just(None), (-12i128..12).prop_map(Some)];
        let step = prop_oneof![
            Just(None),
            (1i128..5).prop_map(Some),
            (-5i128..0).prop_map(Some),
            Just(Some(1i128 << 70)),
            Just(Some(-(1i128 << 70))),
        ];
        prop_oneof![
            3 => (-12i128..12).prop_map(Key::Int),
            5 => (bound.clone(), bound, step).prop_map(|(a, b, c)| Key::Slice(a, b, c)),
            1 => Just(Key::Ellipsis),
            1 => Just(Key::NewAxis),
        ]
    }

    /// The model: numpy's basic indexing done naively, by listing each axis's positions as
    /// Python's `range(*slice.indices(n))` does. `None` when numpy raises.
    fn model(keys: &[Key], shape: &[u64]) -> Option<(Vec<Vec<i128>>, Vec<u64>)> {
        if keys.iter().filter(|k| matches!(k, Key::Ellipsis)).count() > 1 {
            return None;
        }
        let named = keys
            .iter()
            .filter(|k| matches!(k, Key::Int(_) | Key::Slice(..)))
            .count();
        if named > shape.len() {
            return None;
        }
        let mut full: Vec<Key> = Vec::new();
        for k in keys {
            if let Key::Ellipsis = k {
                full.extend((named..shape.len()).map(|_| Key::Slice(None, None, None)));
            } else {
                full.push(k.clone());
            }
        }
        if !keys.iter().any(|k| matches!(k, Key::Ellipsis)) {
            full.extend((named..shape.len()).map(|_| Key::Slice(None, None, None)));
        }
        let (mut axes, mut out) = (Vec::new(), Vec::new());
        for k in full {
            let n = shape[axes.len().min(shape.len() - 1)] as i128;
            match k {
                Key::NewAxis => out.push(1),
                Key::Int(i) => {
                    let j = if i < 0 { i + n } else { i };
                    if !(0..n).contains(&j) {
                        return None;
                    }
                    axes.push(vec![j]);
                }
                Key::Slice(a, b, c) => {
                    let step = c.unwrap_or(1);
                    // Python's slice.indices: clamp, then walk.
                    let fix =
                        |v: i128, lo: i128, hi: i128| (if v < 0 { v + n } else { v }).clamp(lo, hi);
                    let mut v = Vec::new();
                    if step > 0 {
                        let (mut i, b) =
                            (a.map_or(0, |a| fix(a, 0, n)), b.map_or(n, |b| fix(b, 0, n)));
                        while i < b {
                            v.push(i);
                            i = i.saturating_add(step);
                        }
                    } else {
                        let (mut i, b) = (
                            a.map_or(n - 1, |a| fix(a, -1, n - 1)),
                            b.map_or(-1, |b| fix(b, -1, n - 1)),
                        );
                        while i > b {
                            v.push(i);
                            i = i.saturating_add(step);
                        }
                    }
                    out.push(v.len() as u64);
                    axes.push(v);
                }
                Key::Ellipsis => unreachable!(),
            }
        }
        Some((axes, out))
    }

    proptest! {
        #[test]
        fn resolves_as_numpy(
            shape in proptest::collection::vec(0u64..9, 1..4),
            keys in proptest::collection::vec(key(), 0..5),
        ) {
            let items: Vec<Item> = keys
                .iter()
                .map(|k| match *k {
                    Key::Int(i) => Item::Index(i),
                    Key::Slice(a, b, c) => slice(a, b, c),
                    Key::Ellipsis => Item::Ellipsis,
                    Key::NewAxis => Item::NewAxis,
                })
                .collect();
            let got = at(items, &shape);
            match model(&keys, &shape) {
                None => prop_assert!(got.is_err()),
                Some((axes, out)) => {
                    let r = got.unwrap();
                    prop_assert_eq!(&r.shape, &out);
                    let positions: Vec<Vec<i128>> = r.axes.iter().map(delivered).collect();
                    prop_assert_eq!(positions, axes);
                    prop_assert_eq!(r.axes.len(), shape.len());
                    for (s, &n) in r.axes.iter().zip(&shape) {
                        prop_assert!(s.count == 0 || s.last() < n);
                    }
                }
            }
        }
    }
}
