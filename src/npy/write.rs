//! Writing C-order `.npy` files, of arrays and of numpy records.

use super::header::{header_bytes, header_with_descr, record_descr};
use crate::dtype::{DType, Endianness};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes a C-order `.npy` file from batches of bytes already in the file's byte order. The
/// writer counts the bytes: [`finish`](Self::finish) refuses a file that lacks some.
#[derive(Debug)]
pub(crate) struct NpyWriter {
    path: PathBuf,
    file: Option<BufWriter<File>>,
    expected: u64,
    written: u64,
}

impl NpyWriter {
    /// Creates the file of an array of `shape` elements of `dtype` in byte order `endian`
    /// and writes its header.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub(crate) fn create(
        path: impl AsRef<Path>,
        dtype: DType,
        endian: Endianness,
        shape: &[u64],
    ) -> Result<NpyWriter> {
        let expected = shape.iter().product::<u64>() * dtype.itemsize() as u64;
        Self::with_header(path.as_ref(), &header_bytes(dtype, endian, shape), expected)
    }

    /// Creates a file of `rows` records whose leaf fields are `fields` (see
    /// [`record_descr`](super::record_descr)), packed, in native byte order, and writes its
    /// header.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub(crate) fn create_records(
        path: impl AsRef<Path>,
        fields: &[(&str, DType)],
        rows: u64,
    ) -> Result<NpyWriter> {
        let size: u64 = fields.iter().map(|(_, d)| d.itemsize() as u64).sum();
        let header = header_with_descr(&record_descr(fields), &[rows]);
        Self::with_header(path.as_ref(), &header, rows * size)
    }

    fn with_header(path: &Path, header: &[u8], expected: u64) -> Result<NpyWriter> {
        let file = File::create(path).map_err(|e| Error::io("create", path, e))?;
        let mut file = BufWriter::with_capacity(1 << 20, file);
        file.write_all(header)
            .map_err(|e| Error::io("write", path, e))?;
        Ok(NpyWriter {
            path: path.to_path_buf(),
            file: Some(file),
            expected,
            written: 0,
        })
    }

    /// Appends element bytes.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file.
    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(Error::input(&self.path, "writer already finished"));
        };
        file.write_all(bytes)
            .map_err(|e| Error::io("write", &self.path, e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Flushes and syncs the file after checking that every element was written.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when bytes are missing; [`Error::Io`] naming the file.
    pub(crate) fn finish(mut self) -> Result<()> {
        if self.written != self.expected {
            return Err(Error::input(
                &self.path,
                format!(
                    "wrote {} bytes of data, expected {}",
                    self.written, self.expected
                ),
            ));
        }
        if let Some(mut f) = self.file.take() {
            f.flush()
                .and_then(|()| f.get_ref().sync_all())
                .map_err(|e| Error::io("write", &self.path, e))?;
        }
        Ok(())
    }

    /// Removes a partly written file (after an error).
    pub(crate) fn abandon(mut self) {
        self.file.take();
        let _ = std::fs::remove_file(&self.path);
    }
}
