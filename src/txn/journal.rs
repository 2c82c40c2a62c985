//! The journal's bytes: the entries a transaction commits, encoded and decoded as
//! `spec/journal.md` describes them. Nothing here touches a file.

use super::check_relative;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 4] = b"BLZJ";
const VERSION: u32 = 1;
const TAG_PATCH: u8 = 1;
const TAG_SET_LEN: u8 = 2;
const TAG_REMOVE: u8 = 3;
const TAG_META: u8 = 4;
const TAG_REMOVE_DIR: u8 = 5;
const TAG_RENAME: u8 = 6;

/// One step of a committed journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Write `data` at `offset` of the file at `path` (relative to the dataset root).
    Patch {
        /// File, relative to the root.
        path: PathBuf,
        /// Position.
        offset: u64,
        /// Bytes.
        data: Vec<u8>,
    },
    /// Truncate the file to `len` bytes.
    SetLen {
        /// File, relative to the root.
        path: PathBuf,
        /// New length.
        len: u64,
    },
    /// Remove the file.
    Remove {
        /// File, relative to the root.
        path: PathBuf,
    },
    /// Remove a directory and its contents.
    RemoveDir {
        /// Directory, relative to the root.
        path: PathBuf,
    },
    /// Rename a file or directory (replayed only while `from` still exists).
    Rename {
        /// Old path, relative to the root.
        from: PathBuf,
        /// New path, relative to the root.
        to: PathBuf,
    },
    /// Replace the file (relative to the root) with `data`, atomically.
    Meta {
        /// File, relative to the root.
        path: PathBuf,
        /// New content.
        data: Vec<u8>,
    },
}

fn put_path(out: &mut Vec<u8>, p: &Path) {
    let s = p
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/");
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Serializes journal entries (see `spec/dataset.md`).
pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        match e {
            Entry::Patch { path, offset, data } => {
                out.push(TAG_PATCH);
                put_path(&mut out, path);
                out.extend_from_slice(&offset.to_le_bytes());
                out.extend_from_slice(&(data.len() as u64).to_le_bytes());
                out.extend_from_slice(data);
            }
            Entry::SetLen { path, len } => {
                out.push(TAG_SET_LEN);
                put_path(&mut out, path);
                out.extend_from_slice(&len.to_le_bytes());
            }
            Entry::Remove { path } => {
                out.push(TAG_REMOVE);
                put_path(&mut out, path);
            }
            Entry::RemoveDir { path } => {
                out.push(TAG_REMOVE_DIR);
                put_path(&mut out, path);
            }
            Entry::Rename { from, to } => {
                out.push(TAG_RENAME);
                put_path(&mut out, from);
                put_path(&mut out, to);
            }
            Entry::Meta { path, data } => {
                out.push(TAG_META);
                put_path(&mut out, path);
                out.extend_from_slice(&(data.len() as u64).to_le_bytes());
                out.extend_from_slice(data);
            }
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

struct Cursor<'b> {
    buf: &'b [u8],
    pos: usize,
    path: &'b Path,
}

impl<'b> Cursor<'b> {
    fn take(&mut self, n: u64) -> Result<&'b [u8]> {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| Error::header(self.path, "journal entry runs past its end"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn path(&mut self) -> Result<PathBuf> {
        let n = self.u32()?;
        let s = std::str::from_utf8(self.take(u64::from(n))?)
            .map_err(|_| Error::header(self.path, "journal path is not UTF-8"))?;
        let p = PathBuf::from(s);
        check_relative(&p).map_err(|_| {
            Error::header(
                self.path,
                format!("journal names a path outside the dataset: {s:?}"),
            )
        })?;
        Ok(p)
    }
}

/// Parses a journal read from `path`.
///
/// # Errors
/// [`Error::InvalidHeader`] when the bytes are not a complete, intact journal.
pub fn decode(buf: &[u8], path: &Path) -> Result<Vec<Entry>> {
    if buf.len() < 20 || &buf[..4] != MAGIC {
        return Err(Error::header(path, "not a blz journal"));
    }
    let (body, crc) = buf.split_at(buf.len() - 4);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32fast::hash(body) != stored {
        return Err(Error::header(path, "journal checksum mismatch"));
    }
    let mut c = Cursor {
        buf: body,
        pos: 4,
        path,
    };
    if c.u32()? != VERSION {
        return Err(Error::header(path, "unknown journal version"));
    }
    let n = c.u64()?;
    let mut entries = Vec::new();
    for _ in 0..n {
        let tag = c.take(1)?[0];
        let e = match tag {
            TAG_PATCH => {
                let path = c.path()?;
                let offset = c.u64()?;
                let len = c.u64()?;
                Entry::Patch {
                    path,
                    offset,
                    data: c.take(len)?.to_vec(),
                }
            }
            TAG_SET_LEN => Entry::SetLen {
                path: c.path()?,
                len: c.u64()?,
            },
            TAG_REMOVE => Entry::Remove { path: c.path()? },
            TAG_REMOVE_DIR => Entry::RemoveDir { path: c.path()? },
            TAG_RENAME => Entry::Rename {
                from: c.path()?,
                to: c.path()?,
            },
            TAG_META => {
                let path = c.path()?;
                let len = c.u64()?;
                Entry::Meta {
                    path,
                    data: c.take(len)?.to_vec(),
                }
            }
            t => return Err(Error::header(path, format!("unknown journal entry {t}"))),
        };
        entries.push(e);
    }
    if c.pos != body.len() {
        return Err(Error::header(
            path,
            "trailing bytes after the journal entries",
        ));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_roundtrip_and_damage() {
        let e = vec![
            Entry::Patch {
                path: "data/__1__.bin".into(),
                offset: 42,
                data: vec![1, 2, 3],
            },
            Entry::SetLen {
                path: "data/__1__.bin".into(),
                len: 100,
            },
            Entry::Remove {
                path: "data/__2__.bin".into(),
            },
            Entry::RemoveDir {
                path: "data/col".into(),
            },
            Entry::Rename {
                from: "data/a".into(),
                to: "data/b".into(),
            },
            Entry::Meta {
                path: "meta/sizes".into(),
                data: b"{}".to_vec(),
            },
        ];
        let b = encode(&e);
        assert_eq!(decode(&b, Path::new("j")).unwrap(), e);
        for i in [0, 5, 20, b.len() - 1] {
            let mut bad = b.clone();
            bad[i] ^= 1;
            assert!(decode(&bad, Path::new("j")).is_err());
        }
        assert!(decode(&b[..b.len() - 3], Path::new("j")).is_err());
        let evil = encode(&[Entry::Remove {
            path: "../../etc/passwd".into(),
        }]);
        assert!(decode(&evil, Path::new("j")).is_err());
    }
}
