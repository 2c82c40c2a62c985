//! Numpy-style selections on the command line (`10:20`, `::2`, `5`, `-1`, `2:8:3,::-1`, `...`)
//! and their translation into ndarray's [`SliceInfoElem`]s.
//!
//! Semantics are numpy's: an integer picks one position (negative counts from the end, and
//! must lie inside the axis); a slice `start:stop:step` is clamped to the axis like Python's
//! `slice.indices`, and a negative step walks backwards from `start` (default: the last
//! position). ndarray reads `a..b;-k` differently (from `b-1` backwards), so each slice is
//! resolved against the axis extent here and handed to blz as an explicit ndarray range.

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
}

fn norm(i: isize, n: u64) -> i128 {
    if i < 0 {
        n as i128 + i as i128
    } else {
        i as i128
    }
}

/// Resolves ndarray slice elements (as produced by `ndarray::s![]`) against `shape`.
/// Missing trailing axes are taken whole. Negative indices count from the end; a negative
/// step walks the range backwards, as in ndarray.
///
/// # Errors
/// [`Error::OutOfBounds`] for an index outside its axis, and [`Error::InvalidArgument`] for a
/// zero step, `NewAxis`, or more elements than axes.
pub fn resolve(sel: &[SliceInfoElem], shape: &[u64], dataset: &Path) -> Result<Vec<AxisSel>> {
    let oob = |reason: String| Error::OutOfBounds {
        dataset: dataset.to_path_buf(),
        reason,
    };
    if sel.len() > shape.len() {
        return Err(Error::InvalidArgument(format!(
            "selection has {} elements, dataset has {} axes",
            sel.len(),
            shape.len()
        )));
    }
    let mut out = Vec::with_capacity(shape.len());
    for (axis, &n) in shape.iter().enumerate() {
        let s = match sel.get(axis) {
            None => AxisSel::full(n),
            Some(SliceInfoElem::Index(i)) => {
                let j = norm(*i, n);
                if j < 0 || j >= n as i128 {
                    return Err(oob(format!(
                        "index {i} out of range for axis {axis} of extent {n}"
                    )));
                }
                AxisSel {
                    start: j as u64,
                    step: 1,
                    count: 1,
                    reversed: false,
                    keep: false,
                }
            }
            Some(SliceInfoElem::Slice { start, end, step }) => {
                if *step == 0 {
                    return Err(Error::InvalidArgument(format!("step 0 on axis {axis}")));
                }
                let a = norm(*start, n);
                let b = end.map_or(n as i128, |e| norm(e, n));
                if a < 0 || a > n as i128 || b < 0 || b > n as i128 {
                    return Err(oob(format!(
                        "range {start}..{} out of bounds for axis {axis} of extent {n}",
                        end.map_or(String::new(), |e| e.to_string())
                    )));
                }
                let (a, b) = (a as u64, (b as u64).max(a as u64));
                let astep = step.unsigned_abs() as u64;
                let count = (b - a).div_ceil(astep);
                if *step > 0 {
                    AxisSel {
                        start: a,
                        step: astep,
                        count,
                        reversed: false,
                        keep: true,
                    }
                } else {
                    // ndarray: start from the end of the range, walking back by |step|.
                    let first = if count == 0 {
                        a
                    } else {
                        b - 1 - (count - 1) * astep
                    };
                    AxisSel {
                        start: first,
                        step: astep,
                        count,
                        reversed: true,
                        keep: true,
                    }
                }
            }
            Some(SliceInfoElem::NewAxis) => {
                return Err(Error::InvalidArgument(
                    "new axes are not supported in dataset selections".into(),
                ))
            }
        };
        out.push(s);
    }
    Ok(out)
}

/// A parsed numpy-style selection: `Selection::parse("10:20,::-1")`, then
/// [`to_slice_info`](Selection::to_slice_info) against a shape gives what
/// [`Dataset::slice`](crate::Dataset::slice) takes.
///
/// ```
/// use ndarray::SliceInfoElem;
/// let sel = blz::Selection::parse("2:8:3, ::-1")?;
/// let info = sel.to_slice_info(&[10, 4])?;
/// // numpy's 2:8:3 is positions 2 and 5: resolved to ndarray's explicit range 2..6;3.
/// assert_eq!(info[0], SliceInfoElem::Slice { start: 2, end: Some(6), step: 3 });
/// // ::-1 walks the axis of 4 backwards.
/// assert!(matches!(info[1], SliceInfoElem::Slice { step: -1, .. }));
/// assert!(blz::Selection::parse("1:x").is_err());
/// # Ok::<(), blz::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    items: Vec<Item>,
}

impl Selection {
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

    /// The comma-separated items, in order.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// The selection as ndarray slice elements for an array of `shape`, with numpy's
    /// meaning: indices pass through (a read reports those outside their axis), slices are
    /// clamped to their axis, `...` stands for the axes not named.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for more items than axes, two `...`, or a zero step.
    pub fn to_slice_info(&self, shape: &[u64]) -> Result<Vec<SliceInfoElem>> {
        to_slice_info(&self.items, shape).map_err(Error::InvalidArgument)
    }
}

/// One comma-separated item of a selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A single position.
    Index(i128),
    /// `start:stop:step`, each part optional.
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
        let count = if a > b { (a - b - 1) / (-step) + 1 } else { 0 };
        (a, count)
    }
}

/// Translates parsed items into ndarray slice elements for an array of `shape`, with numpy's
/// meaning. Indices are passed through (blz reports those outside their axis); slices are
/// clamped.
fn to_slice_info(items: &[Item], shape: &[u64]) -> std::result::Result<Vec<SliceInfoElem>, String> {
    let explicit = items.iter().filter(|i| **i != Item::Ellipsis).count();
    if explicit > shape.len() {
        return Err(format!(
            "too many indices: the selection has {explicit}, the dataset has {} axes",
            shape.len()
        ));
    }
    let mut expanded = Vec::with_capacity(shape.len());
    for it in items {
        if *it == Item::Ellipsis {
            for _ in 0..shape.len() - explicit {
                expanded.push(Item::Slice {
                    start: None,
                    stop: None,
                    step: None,
                });
            }
        } else {
            expanded.push(*it);
        }
    }
    let mut out = Vec::with_capacity(expanded.len());
    for (axis, (it, &n)) in expanded.iter().zip(shape).enumerate() {
        let n = i128::from(n);
        match *it {
            Item::Index(i) => {
                let j = isize::try_from(i)
                    .map_err(|_| format!("index {i} out of range for axis {axis} of extent {n}"))?;
                out.push(SliceInfoElem::Index(j));
            }
            Item::Slice { start, stop, step } => {
                let step = step.unwrap_or(1);
                let (first, count) = numpy_slice(start, stop, step, n);
                // Both ends lie in 0..=n, so they fit an isize (n came from a u64 shape that
                // blz could allocate).
                let to_isize =
                    |v: i128| isize::try_from(v).map_err(|_| "axis too large".to_string());
                // A step at least as long as the axis selects at most one element, whatever
                // its size: clamp it (as Python clamps slice bounds) so huge steps work.
                let astep = to_isize(step.abs().min(n.max(1)))?;
                let elem = if count == 0 {
                    SliceInfoElem::Slice {
                        start: 0,
                        end: Some(0),
                        step: 1,
                    }
                } else if step > 0 {
                    SliceInfoElem::Slice {
                        start: to_isize(first)?,
                        end: Some(to_isize(first + (count - 1) * step + 1)?),
                        step: astep,
                    }
                } else {
                    // ndarray walks `lo..hi;-k` from hi-1 down by k.
                    let lo = first + (count - 1) * step;
                    SliceInfoElem::Slice {
                        start: to_isize(lo)?,
                        end: Some(to_isize(first + 1)?),
                        step: -astep,
                    }
                };
                out.push(elem);
            }
            Item::Ellipsis => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::s;

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
        assert!(resolve(s![10, ..].as_ref(), &shape, p).is_err());
        assert!(resolve(s![0..11, ..].as_ref(), &shape, p).is_err());
        assert_eq!(
            resolve(
                &[SliceInfoElem::Slice {
                    start: 5,
                    end: Some(2),
                    step: 1
                }],
                &shape,
                p
            )
            .unwrap()[0]
                .count,
            0
        );
    }

    /// The positions numpy selects on one axis of extent n, computed the slow way.
    fn positions(start: Option<i128>, stop: Option<i128>, step: i128, n: i128) -> Vec<i128> {
        let (a, count) = numpy_slice(start, stop, step, n);
        (0..count).map(|k| a + k * step).collect()
    }

    /// The positions an ndarray slice element selects on one axis of extent n.
    fn nd_positions(e: &SliceInfoElem, n: usize) -> Vec<i128> {
        let a = ndarray::Array1::from_iter(0..n as i128);
        match *e {
            SliceInfoElem::Slice { start, end, step } => a
                .slice(ndarray::s![ndarray::Slice::new(start, end, step)])
                .to_vec(),
            _ => unreachable!(),
        }
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
    fn translation_matches_numpy() {
        let n = 13usize;
        let ends = [
            None,
            Some(-20),
            Some(-5),
            Some(-1),
            Some(0),
            Some(3),
            Some(12),
            Some(13),
            Some(40),
        ];
        // Steps beyond isize (Python clamps them) select at most one element.
        let huge = 10i128.pow(30);
        for step in [-huge, -4i128, -1, 1, 2, 5, huge] {
            for &a in &ends {
                for &b in &ends {
                    let items = [Item::Slice {
                        start: a,
                        stop: b,
                        step: Some(step),
                    }];
                    let e = to_slice_info(&items, &[n as u64]).unwrap();
                    assert_eq!(
                        nd_positions(&e[0], n),
                        positions(a, b, step, n as i128),
                        "{a:?}:{b:?}:{step}"
                    );
                }
            }
        }
    }

    #[test]
    fn parsing() {
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("5").unwrap(), vec![Item::Index(5)]);
        assert_eq!(
            parse(" 2:8:3 , ::-1 ").unwrap(),
            vec![
                Item::Slice {
                    start: Some(2),
                    stop: Some(8),
                    step: Some(3)
                },
                Item::Slice {
                    start: None,
                    stop: None,
                    step: Some(-1)
                }
            ]
        );
        assert_eq!(
            parse("[...,-1]").unwrap(),
            vec![Item::Ellipsis, Item::Index(-1)]
        );
        for bad in ["1:2:0", "a", "1:2:3:4", "1,,2", "...,...", "1.5", ":x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let items = parse("...,1").unwrap();
        let e = to_slice_info(&items, &[4, 5, 6]).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[2], SliceInfoElem::Index(1));
        assert!(to_slice_info(&parse("1,2").unwrap(), &[4]).is_err());
    }
}
