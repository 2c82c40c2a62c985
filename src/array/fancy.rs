//! Advanced selections of an array ([`Fancy`]: index lists, points): gathered into a
//! caller's buffer and scattered from one, in one transaction.

use super::{build_array, check_dtype, Dataset};
use crate::dtype::Element;
use crate::engine::{elements_to_bytes, ChunkWrites, GatherPlan};
use crate::error::{Error, Result};
use crate::fancy::Fancy;
use crate::selection::AxisSel;
use ndarray::{ArrayD, ArrayViewD, IxDyn};

impl Dataset {
    /// Checks an advanced selection against the shape and returns the result's shape (see
    /// [`Fancy::resolve`]).
    ///
    /// # Errors
    /// As [`Fancy::resolve`].
    pub fn select_fancy(&self, sel: &Fancy) -> Result<Vec<u64>> {
        sel.resolve(&self.sizes.shape, &self.root)
    }

    fn plan(&self, sel: &Fancy) -> Result<GatherPlan> {
        self.select_fancy(sel)?;
        GatherPlan::new(sel, &self.sizes.shape, &self.core.chunkshape)
    }

    /// Reads an advanced selection into a buffer the caller allocated: native-endian
    /// elements in C order over the result's shape ([`Dataset::select_fancy`]). Only the
    /// chunks the selection touches are read, in parallel, each once however many of its
    /// elements are wanted; a chunk giving only a few elements is read by Blosc block.
    /// Memory beyond `out` stays at the selection's positions and a chunk per thread.
    ///
    /// # Errors
    /// [`Error::OutOfBounds`] for a position outside the shape; [`Error::InvalidArgument`]
    /// for a malformed selection; [`Error::Mismatch`] when `out` is not exactly the
    /// selection's size; corrupt or missing chunks as [`Error`]s naming the file and chunk.
    pub fn read_fancy_into(&self, sel: &Fancy, out: &mut [u8]) -> Result<()> {
        let plan = self.plan(sel)?;
        let want = sel.elements().saturating_mul(self.core.itemsize() as u64);
        if out.len() as u64 != want {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!(
                    "a buffer of {} bytes given for a selection of {want} bytes",
                    out.len()
                ),
            });
        }
        if want == 0 {
            return Ok(());
        }
        self.unless_changed(self.core.gather_into(&plan, out))
    }

    /// Reads an advanced selection into a new array of the result's shape.
    ///
    /// ```
    /// # fn main() -> blz::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use blz::fancy::{AxisIndex, Fancy};
    /// let mut ds = blz::Dataset::create(dir.path().join("a.blz"), blz::DType::I64, &[0])?;
    /// ds.append(&ndarray::Array1::from_iter(0..100i64).into_dyn().view())?;
    /// let got = ds.read_fancy::<i64>(&Fancy::orthogonal(vec![AxisIndex::List(vec![42, 7, 42])]))?;
    /// assert_eq!(got.as_slice().unwrap(), &[42, 7, 42]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Mismatch`] when `T` does not hold the dataset's dtype; otherwise as
    /// [`Dataset::read_fancy_into`].
    pub fn read_fancy<T: Element>(&self, sel: &Fancy) -> Result<ArrayD<T>> {
        check_dtype::<T>(&self.root, self.meta.dtype)?;
        let shape = self.select_fancy(sel)?;
        let flat = [AxisSel::full(sel.elements())];
        let a = build_array::<T>(&flat, self.core.itemsize(), |buf| {
            self.read_fancy_into(sel, buf)
        })?;
        let dims: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
        a.into_shape_with_order(IxDyn(&dims))
            .map_err(|e| Error::InvalidArgument(e.to_string()))
    }

    /// Writes native-endian elements (C order over the result's shape, as
    /// [`Dataset::read_fancy_into`] lays it out) into an advanced selection, in one
    /// transaction: each chunk touched is read, patched and re-encoded once (a few at a
    /// time, in parallel), then committed with the others. Of two values for one element,
    /// the later in the selection's order wins (numpy's rule).
    ///
    /// # Errors
    /// [`Error::ReadOnly`]; [`Error::Mismatch`] when `bytes` is not exactly the selection's
    /// size; otherwise as [`Dataset::read_fancy_into`]. On error the dataset keeps its last
    /// committed state.
    pub fn write_fancy_bytes(&mut self, sel: &Fancy, bytes: &[u8]) -> Result<()> {
        let _turn = self.turn()?;
        self.check_writable()?;
        let plan = self.plan(sel)?;
        let want = sel.elements().saturating_mul(self.core.itemsize() as u64);
        if bytes.len() as u64 != want {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!(
                    "{} bytes given for a selection of {want} bytes",
                    bytes.len()
                ),
            });
        }
        if want == 0 {
            return Ok(());
        }
        let shape = self.sizes.shape.clone();
        let committed = self.nchunks();
        let at = shape.clone();
        self.run(shape, true, move |core, txn, _| {
            let mut w = ChunkWrites::new(&core.store, committed, None);
            core.scatter(txn, &mut w, &plan, &at, bytes)?;
            w.finish(txn)
        })
    }

    /// Writes `data` (of the result's shape, see [`Dataset::select_fancy`]) into an
    /// advanced selection, as [`Dataset::write_fancy_bytes`].
    ///
    /// # Errors
    /// [`Error::Mismatch`] when `T` does not hold the dataset's dtype or `data` is not of
    /// the result's shape; otherwise as [`Dataset::write_fancy_bytes`].
    pub fn write_fancy<T: Element>(&mut self, sel: &Fancy, data: &ArrayViewD<'_, T>) -> Result<()> {
        let _turn = self.turn()?;
        check_dtype::<T>(&self.root, self.meta.dtype)?;
        let shape = self.select_fancy(sel)?;
        let want: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
        if data.shape() != want.as_slice() {
            return Err(Error::Mismatch {
                dataset: self.root.to_path_buf(),
                reason: format!(
                    "data has shape {:?}, the selection has shape {want:?}",
                    data.shape()
                ),
            });
        }
        let std = data.as_standard_layout();
        let slice = std
            .as_slice()
            .ok_or_else(|| Error::InvalidArgument("data is not contiguous".into()))?;
        let bytes = elements_to_bytes(slice, self.core.itemsize());
        self.write_fancy_bytes(sel, &bytes)
    }
}
