//! Advanced (fancy) selections: lists of indices per axis (numpy's integer arrays, zarr's
//! `oindex`) and point coordinates over several axes (numpy's broadcast integer arrays,
//! zarr's `vindex`), beside the strided [`AxisSel`]s of basic selections.
//!
//! A [`Fancy`] selection is a list of [`Group`]s, each covering one or more axes of the
//! dataset (every axis exactly once). Each group adds one axis to the result, in the order
//! the groups are given: a strided axis its count (none for a single index), a list of
//! indices its length, and a point group its number of points. The result is laid out in C
//! order over those axes, so
//!
//! - [`Fancy::orthogonal`] (one group per axis, in axis order) is zarr's `oindex`: the
//!   result is the outer product of the per-axis selections;
//! - [`Fancy::points`] (one point group over every axis) is zarr's `vindex`;
//! - numpy's mixed keys are a point group for the advanced indices beside strided groups
//!   for the sliced axes, the point group first when numpy puts the broadcast axes first.
//!
//! Indices are positions (`u64`, not negative: a client maps numpy's negative indices
//! first), in any order, repeats allowed. [`Fancy::resolve`] checks them against a shape,
//! the one place this is done, and gives the result's shape.
//!
//! Reads and writes are [`Dataset::read_fancy_into`](crate::Dataset::read_fancy_into) and
//! [`Dataset::write_fancy_bytes`](crate::Dataset::write_fancy_bytes) (and their typed
//! forms); a table's rows are gathered by [`Table::take`](crate::Table::take) and
//! scattered by [`Table::put`](crate::Table::put).
//!
//! ```
//! use blz::fancy::{AxisIndex, Fancy};
//! use blz::selection::AxisSel;
//! // Rows 7, 1, 7 of a 10 x 4 array, every column: a 3 x 4 result.
//! let f = Fancy::orthogonal(vec![AxisIndex::List(vec![7, 1, 7]), AxisIndex::Strided(AxisSel::full(4))]);
//! assert_eq!(f.resolve(&[10, 4], std::path::Path::new("d.blz"))?, vec![3, 4]);
//! // Two points (0, 3) and (9, 0).
//! let p = Fancy::points(vec![vec![0, 9], vec![3, 0]]);
//! assert_eq!(p.resolve(&[10, 4], std::path::Path::new("d.blz"))?, vec![2]);
//! assert!(Fancy::points(vec![vec![10], vec![0]]).resolve(&[10, 4], std::path::Path::new("d")).is_err());
//! # Ok::<(), blz::Error>(())
//! ```

use crate::error::{Error, Result};
use crate::selection::AxisSel;
use std::path::Path;

/// The selection on one axis of an orthogonal selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AxisIndex {
    /// A strided selection (a slice, or a single index when `keep` is false), as basic
    /// selections resolve it; a reversed one is delivered largest position first.
    Strided(AxisSel),
    /// Positions on the axis, in the order wanted (unsorted, repeats allowed).
    List(Vec<u64>),
}

/// One group of a [`Fancy`] selection: the axes it covers and what it selects on them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Group {
    /// One axis, selected on its own.
    Axis {
        /// The dataset axis.
        axis: usize,
        /// What is selected on it.
        index: AxisIndex,
    },
    /// Several axes selected together, point by point: point `p` is at
    /// `coords[0][p]` on `axes[0]`, `coords[1][p]` on `axes[1]`, ...
    Points {
        /// The dataset axes (distinct), in the order of `coords`.
        axes: Vec<usize>,
        /// One coordinate list per axis, all of the same length (the number of points).
        coords: Vec<Vec<u64>>,
    },
}

impl Group {
    /// The result's extent along this group's axis (`None`: the group adds no axis, a
    /// single strided index).
    pub fn extent(&self) -> Option<u64> {
        match self {
            Group::Axis {
                index: AxisIndex::Strided(s),
                ..
            } => s.keep.then_some(s.count),
            Group::Axis {
                index: AxisIndex::List(v),
                ..
            } => Some(v.len() as u64),
            Group::Points { coords, .. } => Some(coords.first().map_or(0, |c| c.len() as u64)),
        }
    }

    /// The number of positions this group selects (its extent, 1 for a single index).
    pub fn count(&self) -> u64 {
        match self {
            Group::Axis {
                index: AxisIndex::Strided(s),
                ..
            } => s.count,
            g => g.extent().unwrap_or(0),
        }
    }

    /// The dataset axes this group covers.
    pub fn axes(&self) -> Vec<usize> {
        match self {
            Group::Axis { axis, .. } => vec![*axis],
            Group::Points { axes, .. } => axes.clone(),
        }
    }
}

/// An advanced selection: [`Group`]s covering every axis of a dataset once (see the module
/// documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fancy {
    groups: Vec<Group>,
}

impl Fancy {
    /// A selection of these groups; the result has one axis per group (but single strided
    /// indices), in this order.
    pub fn new(groups: Vec<Group>) -> Fancy {
        Fancy { groups }
    }

    /// An orthogonal selection (zarr's `oindex`): `axes[i]` on axis `i`, the result their
    /// outer product.
    pub fn orthogonal(axes: Vec<AxisIndex>) -> Fancy {
        Fancy {
            groups: axes
                .into_iter()
                .enumerate()
                .map(|(axis, index)| Group::Axis { axis, index })
                .collect(),
        }
    }

    /// A point selection over every axis (zarr's `vindex`): `coords[a][p]` is point `p`'s
    /// position on axis `a`.
    pub fn points(coords: Vec<Vec<u64>>) -> Fancy {
        Fancy {
            groups: vec![Group::Points {
                axes: (0..coords.len()).collect(),
                coords,
            }],
        }
    }

    /// The groups, in result order.
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// Number of elements selected.
    pub fn elements(&self) -> u64 {
        self.groups
            .iter()
            .map(Group::count)
            .fold(1u64, u64::saturating_mul)
    }

    /// Checks the selection against `shape` and returns the result's shape: the extent of
    /// each group (single strided indices add none), in group order.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] (naming `dataset`) for a position outside its axis;
    /// [`Error::InvalidArgument`] when the groups do not cover every axis exactly once, a
    /// strided selection has a zero step, or a point group's coordinate lists differ in
    /// length or number from its axes.
    pub fn resolve(&self, shape: &[u64], dataset: &Path) -> Result<Vec<u64>> {
        let oob = |reason: String| Error::OutOfBounds {
            dataset: dataset.to_path_buf(),
            reason,
        };
        let mut seen = vec![false; shape.len()];
        let mut cover = |axis: usize| -> Result<u64> {
            match seen.get_mut(axis) {
                None => Err(Error::InvalidArgument(format!(
                    "axis {axis} named, the dataset has {} axes",
                    shape.len()
                ))),
                Some(true) => Err(Error::InvalidArgument(format!(
                    "axis {axis} is in two groups of the selection"
                ))),
                Some(s) => {
                    *s = true;
                    Ok(shape[axis])
                }
            }
        };
        let mut out = Vec::with_capacity(self.groups.len());
        for g in &self.groups {
            match g {
                Group::Axis { axis, index } => {
                    let n = cover(*axis)?;
                    match index {
                        AxisIndex::Strided(s) => {
                            if s.step == 0 {
                                return Err(Error::InvalidArgument(format!(
                                    "step 0 on axis {axis}"
                                )));
                            }
                            if s.count > 0
                                && s.count
                                    .checked_sub(1)
                                    .and_then(|c| c.checked_mul(s.step))
                                    .and_then(|d| d.checked_add(s.start))
                                    .is_none_or(|last| last >= n)
                            {
                                return Err(oob(format!(
                                    "{} positions from {} by {} run past axis {axis} of extent {n}",
                                    s.count, s.start, s.step
                                )));
                            }
                        }
                        AxisIndex::List(v) => {
                            if let Some(bad) = v.iter().find(|&&i| i >= n) {
                                return Err(oob(format!(
                                    "index {bad} out of range for axis {axis} of extent {n}"
                                )));
                            }
                        }
                    }
                }
                Group::Points { axes, coords } => {
                    if axes.len() != coords.len() || axes.is_empty() {
                        return Err(Error::InvalidArgument(format!(
                            "a point group names {} axes and gives {} coordinate lists",
                            axes.len(),
                            coords.len()
                        )));
                    }
                    let npoints = coords[0].len();
                    for (&axis, c) in axes.iter().zip(coords) {
                        let n = cover(axis)?;
                        if c.len() != npoints {
                            return Err(Error::InvalidArgument(format!(
                                "point coordinates of unequal lengths ({} and {npoints})",
                                c.len()
                            )));
                        }
                        if let Some(bad) = c.iter().find(|&&i| i >= n) {
                            return Err(oob(format!(
                                "index {bad} out of range for axis {axis} of extent {n}"
                            )));
                        }
                    }
                }
            }
            out.extend(g.extent());
        }
        if let Some(axis) = seen.iter().position(|s| !s) {
            return Err(Error::InvalidArgument(format!(
                "axis {axis} is in no group of the selection"
            )));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("d")
    }

    #[test]
    fn shapes_and_errors() {
        let f = Fancy::new(vec![
            Group::Axis {
                axis: 1,
                index: AxisIndex::Strided(AxisSel {
                    start: 2,
                    step: 1,
                    count: 1,
                    reversed: false,
                    keep: false,
                }),
            },
            Group::Points {
                axes: vec![2, 0],
                coords: vec![vec![0, 1, 2], vec![4, 4, 0]],
            },
        ]);
        assert_eq!(f.resolve(&[5, 3, 3], p()).unwrap(), vec![3]);
        assert_eq!(f.elements(), 3);
        // Out of bounds, on each kind of group.
        assert!(matches!(
            f.resolve(&[4, 3, 3], p()),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(matches!(
            f.resolve(&[5, 2, 3], p()),
            Err(Error::OutOfBounds { .. })
        ));
        let l = Fancy::orthogonal(vec![AxisIndex::List(vec![0, 3])]);
        assert!(matches!(
            l.resolve(&[3], p()),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(matches!(
            l.resolve(&[0], p()),
            Err(Error::OutOfBounds { .. })
        ));
        // Huge strides do not overflow.
        let s = Fancy::orthogonal(vec![AxisIndex::Strided(AxisSel {
            start: 1,
            step: u64::MAX,
            count: 3,
            reversed: false,
            keep: true,
        })]);
        assert!(matches!(
            s.resolve(&[3], p()),
            Err(Error::OutOfBounds { .. })
        ));
        // Coverage and shapes of groups.
        let bad = |f: Fancy, shape: &[u64]| {
            matches!(f.resolve(shape, p()), Err(Error::InvalidArgument(_)))
        };
        assert!(bad(
            Fancy::orthogonal(vec![AxisIndex::List(vec![0])]),
            &[3, 3]
        ));
        assert!(bad(Fancy::points(vec![vec![0], vec![0, 1]]), &[3, 3]));
        assert!(bad(Fancy::points(vec![]), &[]));
        assert!(bad(
            Fancy::new(vec![
                Group::Axis {
                    axis: 0,
                    index: AxisIndex::List(vec![])
                },
                Group::Axis {
                    axis: 0,
                    index: AxisIndex::List(vec![])
                }
            ]),
            &[3]
        ));
        assert!(bad(
            Fancy::new(vec![Group::Axis {
                axis: 1,
                index: AxisIndex::List(vec![])
            }]),
            &[3]
        ));
        // Empty lists select nothing and are fine.
        let e = Fancy::orthogonal(vec![AxisIndex::List(vec![]), AxisIndex::List(vec![1])]);
        assert_eq!(e.resolve(&[0, 2], p()).unwrap(), vec![0, 1]);
        assert_eq!(e.elements(), 0);
    }
}
