//! Reading `.npy` files: arrays row by row, records field by field, in bounded batches.

use super::header::{
    parse_raw_dict, read_header, read_header_text, record_fields, NpyHeader, Py, RecordField,
};
use crate::dtype::{swap_bytes, DType, Endianness};
use crate::error::{Error, Result};
use crate::table::Values;
use ndarray::{ArrayViewD, Axis, IxDyn, ShapeBuilder, Slice};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Converts elements read from a file in `endian` order to native order, in place (bools are
/// normalised to 0 or 1).
pub(crate) fn to_native(bytes: &mut [u8], dtype: DType, endian: Endianness) {
    if endian != Endianness::native() {
        swap_bytes(bytes, dtype.swap_unit());
    }
    if dtype == DType::Bool {
        for b in bytes {
            *b = u8::from(*b != 0);
        }
    }
}

/// Opens `path` with a large buffer; returns the reader and the file's length.
fn open_file(path: &Path) -> Result<(BufReader<File>, u64)> {
    let f = File::open(path).map_err(|e| Error::io("open", path, e))?;
    let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    Ok((BufReader::with_capacity(1 << 20, f), len))
}

/// Streams the rows (positions along axis 0) of a `.npy` file of one array as native-endian
/// bytes in C order, whatever the file's byte order and memory order. A 0-d array reads as
/// one row of one element. Fortran-order files are loaded whole on the first read (their
/// rows are scattered through the file); C-order files are read a batch at a time.
#[derive(Debug)]
pub struct NpyReader {
    path: PathBuf,
    header: NpyHeader,
    file: BufReader<File>,
    /// Rows already returned.
    done: u64,
    /// Whole data of a Fortran-order file, loaded on the first read.
    fortran_data: Option<Vec<u8>>,
}

impl NpyReader {
    /// Opens a `.npy` file and checks that it holds all the data its header announces.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be opened; [`Error::InvalidInput`] naming the file
    /// for a header that is malformed, a dtype blz cannot store (records included: read
    /// those with [`RecordReader`]), or a file shorter than its header announces.
    pub fn open(path: impl AsRef<Path>) -> Result<NpyReader> {
        let path = path.as_ref();
        let (mut file, file_len) = open_file(path)?;
        let (header, data_at) = read_header(&mut file, path)?;
        let need = header
            .elements()
            .and_then(|n| n.checked_mul(header.dtype.itemsize() as u64))
            .ok_or_else(|| Error::input(path, "shape is too large"))?;
        check_data_len(file_len, data_at, need).map_err(|e| Error::input(path, e))?;
        Ok(NpyReader {
            path: path.to_path_buf(),
            header,
            file,
            done: 0,
            fortran_data: None,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's header.
    pub fn header(&self) -> &NpyHeader {
        &self.header
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.header.dtype
    }

    /// The array's shape as a dataset takes it: `[1]` for a 0-d array, else the header's.
    pub fn shape(&self) -> Vec<u64> {
        let mut s = vec![self.rows()];
        s.extend_from_slice(self.row_shape());
        s
    }

    /// Extent of axis 0 (1 for a 0-d array).
    pub fn rows(&self) -> u64 {
        self.header.shape.first().copied().unwrap_or(1)
    }

    /// Shape of one row (empty for 1-d and 0-d arrays).
    pub fn row_shape(&self) -> &[u64] {
        self.header.shape.get(1..).unwrap_or(&[])
    }

    /// Bytes of one row.
    pub fn row_bytes(&self) -> u64 {
        self.row_shape().iter().product::<u64>() * self.header.dtype.itemsize() as u64
    }

    /// Reads up to `max` further rows as native-endian bytes in C order, with their number;
    /// `None` at the end.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when it cannot be read (it changed since it was opened).
    pub fn next_rows(&mut self, max: u64) -> Result<Option<(Vec<u8>, u64)>> {
        let n = max.min(self.rows() - self.done);
        if n == 0 {
            return Ok(None);
        }
        let mut out = if self.header.fortran && self.header.shape.len() > 1 {
            self.fortran_rows(self.done, n)?
        } else {
            let mut buf = vec![0u8; (n * self.row_bytes()) as usize];
            self.file
                .read_exact(&mut buf)
                .map_err(|e| Error::io("read", &self.path, e))?;
            buf
        };
        to_native(&mut out, self.header.dtype, self.header.endian);
        self.done += n;
        Ok(Some((out, n)))
    }

    /// The remaining rows in batches of about `batch_bytes` bytes (whole rows, at least one),
    /// each handed to `progress` by its number of rows: what
    /// [`Dataset::append_batches`](crate::Dataset::append_batches) takes.
    pub fn batches<'a>(
        &'a mut self,
        batch_bytes: u64,
        mut progress: impl FnMut(u64) + 'a,
    ) -> impl Iterator<Item = Result<Vec<u8>>> + 'a {
        let per = (batch_bytes / self.row_bytes().max(1)).max(1);
        std::iter::from_fn(move || match self.next_rows(per) {
            Ok(Some((bytes, n))) => {
                progress(n);
                Some(Ok(bytes))
            }
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        })
    }

    fn fortran_rows(&mut self, r0: u64, n: u64) -> Result<Vec<u8>> {
        let isz = self.header.dtype.itemsize();
        if self.fortran_data.is_none() {
            let total = self.header.elements().unwrap_or(0) as usize * isz;
            let mut all = vec![0u8; total];
            self.file
                .read_exact(&mut all)
                .map_err(|e| Error::io("read", &self.path, e))?;
            self.fortran_data = Some(all);
        }
        let data = self.fortran_data.as_deref().unwrap_or(&[]);
        let mut shape: Vec<usize> = self.header.shape.iter().map(|&d| d as usize).collect();
        let mut strides = Vec::with_capacity(shape.len() + 1);
        let mut s = isz;
        for &d in &shape {
            strides.push(s);
            s *= d;
        }
        shape.push(isz);
        strides.push(1);
        let view = ArrayViewD::from_shape(IxDyn(&shape).strides(IxDyn(&strides)), data)
            .map_err(|e| Error::input(&self.path, e.to_string()))?;
        let rows = view.slice_axis(Axis(0), Slice::from(r0 as usize..(r0 + n) as usize));
        Ok(rows.iter().copied().collect())
    }
}

/// Checks that a file of `file_len` bytes holds the `need` bytes of data its header announces
/// after the header's `data_at` bytes.
fn check_data_len(file_len: u64, data_at: u64, need: u64) -> std::result::Result<(), String> {
    if file_len < data_at.saturating_add(need) {
        return Err(format!(
            "file is truncated: the header announces {need} bytes of data, the file holds {}",
            file_len.saturating_sub(data_at)
        ));
    }
    Ok(())
}

/// A `.npy` file of records (a 1-d array of a structured dtype), read field by field: what
/// becomes a table, a column per leaf field (`pos/x` for field `x` of a nested record `pos`).
/// Padding between fields is skipped.
#[derive(Debug)]
pub struct RecordReader {
    path: PathBuf,
    file: BufReader<File>,
    fields: Vec<RecordField>,
    itemsize: usize,
    rows: u64,
    done: u64,
}

impl RecordReader {
    /// Opens `path` if it holds records: `Ok(None)` when its dtype is not structured (or it
    /// cannot be read as `.npy` at all, which [`NpyReader::open`] then reports).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the file for records blz cannot store (sub-array
    /// fields, unsupported field dtypes, more than one axis) or a truncated file.
    pub fn open(path: impl AsRef<Path>) -> Result<Option<RecordReader>> {
        let path = path.as_ref();
        let Ok((mut file, file_len)) = open_file(path) else {
            return Ok(None);
        };
        let Ok((text, data_at)) = read_header_text(&mut file) else {
            return Ok(None);
        };
        let Ok((Py::Seq(descr), _fortran, shape)) = parse_raw_dict(&text) else {
            return Ok(None);
        };
        let bad = |e: String| Error::input(path, e);
        let mut fields = Vec::new();
        let itemsize = record_fields(&descr, "", 0, &mut fields).map_err(bad)?;
        if fields.is_empty() {
            return Err(bad("structured dtype without fields".into()));
        }
        if shape.len() > 1 {
            return Err(bad(format!(
                "records of shape {shape:?}: a table takes a 1-d array of records"
            )));
        }
        // A 0-d array is one record; Fortran order means nothing for one axis.
        let rows = shape.first().copied().unwrap_or(1);
        let need = rows
            .checked_mul(itemsize as u64)
            .ok_or_else(|| bad("shape is too large".into()))?;
        check_data_len(file_len, data_at, need).map_err(bad)?;
        Ok(Some(RecordReader {
            path: path.to_path_buf(),
            file,
            fields,
            itemsize,
            rows,
            done: 0,
        }))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The leaf fields, in the order of the dtype.
    pub fn fields(&self) -> &[RecordField] {
        &self.fields
    }

    /// Bytes of one record, padding included.
    pub fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// Number of records.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Reads up to `max` further records as one native-endian value list per field, named
    /// by the field's path (what [`Table::append_batches`](crate::Table::append_batches)
    /// takes); `None` at the end.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file when it cannot be read (it changed since it was opened).
    pub fn next_records(&mut self, max: u64) -> Result<Option<Vec<(String, Values)>>> {
        let n = max.min(self.rows - self.done) as usize;
        if n == 0 {
            return Ok(None);
        }
        let mut buf = vec![0u8; n * self.itemsize];
        self.file
            .read_exact(&mut buf)
            .map_err(|e| Error::io("read", &self.path, e))?;
        let cols = self
            .fields
            .iter()
            .map(|f| {
                let isz = f.dtype.itemsize();
                let mut col = Vec::with_capacity(n * isz);
                if self.itemsize > 0 {
                    for rec in buf.chunks_exact(self.itemsize) {
                        col.extend_from_slice(&rec[f.offset..f.offset + isz]);
                    }
                }
                to_native(&mut col, f.dtype, f.endian);
                (
                    f.path.clone(),
                    Values::Fixed {
                        dtype: f.dtype,
                        data: col,
                    },
                )
            })
            .collect();
        self.done += n as u64;
        Ok(Some(cols))
    }

    /// The remaining records in batches of about `batch_bytes` bytes (at least one record),
    /// each handed to `progress` by its number of records.
    pub fn batches<'a>(
        &'a mut self,
        batch_bytes: u64,
        mut progress: impl FnMut(u64) + 'a,
    ) -> impl Iterator<Item = Result<Vec<(String, Values)>>> + 'a {
        let per = (batch_bytes / self.itemsize.max(1) as u64).max(1);
        std::iter::from_fn(move || match self.next_records(per) {
            Ok(Some(cols)) => {
                progress(cols.first().map_or(0, |(_, v)| v.len() as u64));
                Some(Ok(cols))
            }
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        })
    }
}

/// Reads a whole `.npy` file of one array: its header and its elements as native-endian
/// bytes in C order. For small files; stream large ones with [`NpyReader`].
///
/// # Errors
/// As [`NpyReader::open`] and [`NpyReader::next_rows`].
pub fn read_all(path: impl AsRef<Path>) -> Result<(NpyHeader, Vec<u8>)> {
    let mut r = NpyReader::open(path)?;
    let mut out = Vec::new();
    while let Some((b, _)) = r.next_rows(u64::MAX)? {
        out.extend_from_slice(&b);
    }
    Ok((r.header, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npy::header::{header_bytes, header_with_descr, record_descr};

    /// A shape whose data size nearly fills a u64 is a truncated file, not an overflow.
    #[test]
    fn huge_shapes_are_truncated_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.npy");
        let mut bytes = header_bytes(DType::F64, Endianness::Little, &[u64::MAX / 8]);
        bytes.extend_from_slice(&[0; 16]);
        std::fs::write(&p, &bytes).unwrap();
        let e = NpyReader::open(&p).expect_err("refused").to_string();
        assert!(e.contains("truncated"), "{e}");
        let mut bytes = header_with_descr(&record_descr(&[("a", DType::F64)]), &[u64::MAX / 8]);
        bytes.extend_from_slice(&[0; 16]);
        std::fs::write(&p, &bytes).unwrap();
        let e = RecordReader::open(&p).expect_err("refused").to_string();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn fortran_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.npy");
        // A 2x3 int16 array [[0,1,2],[3,4,5]] stored in Fortran order, big-endian.
        let mut bytes = header_bytes(DType::I16, Endianness::Big, &[2, 3]);
        let pos = bytes
            .windows(5)
            .position(|w| w == b"False")
            .expect("header has False");
        bytes.splice(pos..pos + 5, b"True ".iter().copied());
        for v in [0i16, 3, 1, 4, 2, 5] {
            bytes.extend_from_slice(&v.to_be_bytes());
        }
        std::fs::write(&p, &bytes).unwrap();
        let (h, data) = read_all(&p).unwrap();
        assert!(h.fortran);
        let vals: Vec<i16> = data
            .chunks_exact(2)
            .map(|c| i16::from_ne_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(vals, vec![0, 1, 2, 3, 4, 5]);
    }
}
