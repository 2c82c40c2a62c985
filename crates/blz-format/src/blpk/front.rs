//! A superchunk file's front matter as byte ranges: what every reader of the file reads
//! before any chunk (the header, the metadata section and the offsets table). A storage
//! backend where each read is a request keeps a copy of these bytes where opening the
//! dataset finds them (the object store: in its state object), so that a chunk then costs
//! one request.

use super::reader::Layout;
use crate::error::Result;
use crate::storage::StorageFile;
use std::ops::Range;
use std::path::Path;
use std::sync::Mutex;

/// A file whose reads are recorded.
struct Recorder<'a> {
    file: &'a dyn StorageFile,
    reads: Mutex<Vec<Range<u64>>>,
}

impl StorageFile for Recorder<'_> {
    fn len(&self) -> Result<u64> {
        self.file.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_at(offset, buf)?;
        if !buf.is_empty() {
            self.reads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(offset..offset + buf.len() as u64);
        }
        Ok(())
    }
    fn write_at(&self, _offset: u64, _data: &[u8]) -> Result<()> {
        Err(crate::error::Error::io(
            "write",
            self.file.path(),
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "read only"),
        ))
    }
    fn set_len(&self, _len: u64) -> Result<()> {
        self.write_at(0, &[])
    }
    fn sync(&self) -> Result<()> {
        Ok(())
    }
    fn path(&self) -> &Path {
        self.file.path()
    }
    fn small_reads_are_cheap(&self) -> bool {
        self.file.small_reads_are_cheap()
    }
}

/// The byte ranges of `file` that opening it as a superchunk file reads ([`Layout::read`]:
/// header, metadata section, offsets table), sorted and merged where they touch; `None` when
/// the file is not a readable superchunk file (then there is nothing to keep).
pub fn front_ranges(file: &dyn StorageFile) -> Option<Vec<Range<u64>>> {
    let rec = Recorder {
        file,
        reads: Mutex::default(),
    };
    Layout::read(&rec).ok()?;
    let mut reads = rec
        .reads
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    reads.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(reads.len());
    for r in reads {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    Some(merged)
}
