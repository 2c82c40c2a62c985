//! A file's entry in a state (or a manifest): the object holding it, its extents, or its text
//! inline, with the front a superchunk file carries; and the checks a loaded entry passes.

use crate::front::Front;
use crate::keys::plain_key;
use crate::keys::ExtentObject;
use crate::keys::STATE_VERSION_EXTENTS;
use blz_format::error::Error;
use blz_format::error::Result;
use serde::Deserialize;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
/// One file of a committed state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StateFile {
    /// Held by an object: its key relative to the dataset's prefix, and its length.
    Object {
        /// The object's key below the dataset's prefix.
        key: String,
        /// The file's length in bytes (the object's size).
        len: u64,
        /// A copy of the bytes every reader of the file reads first, if the writer kept one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        front: Option<Front>,
    },
    /// A small meta document kept in the state itself.
    Inline {
        /// The file's whole content (UTF-8).
        text: String,
    },
    /// Held in pieces of objects (state version 2): its bytes are its extents' bytes,
    /// concatenated in order.
    Extents {
        /// The file's length in bytes (the sum of its extents' lengths).
        len: u64,
        /// The objects the extents name: each key below the dataset's prefix and the
        /// object's size.
        objects: Vec<ExtentObject>,
        /// The file's bytes in order, each `[object, at, length]`: `length` bytes of
        /// `objects[object]` from its byte `at`.
        extents: Vec<[u64; 3]>,
        /// A copy of the bytes every reader of the file reads first, if the writer kept one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        front: Option<Front>,
    },
}

impl StateFile {
    /// The keys of the objects the file's entry names: those holding its bytes, then the
    /// one holding its block index if the state does not carry it (none for an inline
    /// file).
    pub fn keys(&self) -> Vec<&str> {
        let mut keys = match self {
            StateFile::Object { key, .. } => vec![key.as_str()],
            StateFile::Inline { .. } => Vec::new(),
            StateFile::Extents { objects, .. } => objects.iter().map(|o| o.key.as_str()).collect(),
        };
        let index = self.front().and_then(|f| f.blocks_object.as_ref());
        keys.extend(index.map(|o| o.key.as_str()));
        keys
    }

    /// The file's front, if it has one.
    pub(crate) fn front(&self) -> Option<&Front> {
        match self {
            StateFile::Object { front, .. } | StateFile::Extents { front, .. } => front.as_ref(),
            StateFile::Inline { .. } => None,
        }
    }

    /// Where the entry keeps its front (`None` for an inline file, which has none).
    pub(crate) fn front_mut(&mut self) -> Option<&mut Option<Front>> {
        match self {
            StateFile::Object { front, .. } | StateFile::Extents { front, .. } => Some(front),
            StateFile::Inline { .. } => None,
        }
    }

    /// What is wrong with an extents entry, if anything.
    pub(crate) fn extents_fault(&self) -> Option<String> {
        let StateFile::Extents {
            len,
            objects,
            extents,
            ..
        } = self
        else {
            return None;
        };
        let mut total = 0u64;
        for (i, &[o, at, n]) in extents.iter().enumerate() {
            let size = usize::try_from(o)
                .ok()
                .and_then(|o| objects.get(o))
                .map(|o| o.size);
            let inside = size.is_some_and(|size| at.checked_add(n).is_some_and(|e| e <= size));
            if n == 0 || !inside {
                return Some(format!(
                    "extent {i} ([{o}, {at}, {n}]) is empty or not inside a listed object"
                ));
            }
            total = total.saturating_add(n);
        }
        if total != *len {
            return Some(format!("extents of {total} bytes for a file of {len}"));
        }
        // Each byte of an object is written once, at one place of the file: two extents
        // sharing bytes of an object (or an object listed twice) are a damaged entry, and
        // would read one chunk's bytes, whole and valid, in another's place.
        let mut keys: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
        keys.sort_unstable();
        if keys.windows(2).any(|w| w[0] == w[1]) {
            return Some("an object listed twice".into());
        }
        let mut used: Vec<[u64; 3]> = extents.clone();
        used.sort_unstable();
        used.windows(2)
            .find(|w| w[0][0] == w[1][0] && w[0][1] + w[0][2] > w[1][1])
            .map(|w| {
                format!(
                    "extents [{}, {}, {}] and [{}, {}, {}] share bytes of an object",
                    w[0][0], w[0][1], w[0][2], w[1][0], w[1][1], w[1][2]
                )
            })
    }
}

/// Checks the file entries `files` of a state of layout `version`, read from the object
/// `path`: every path and key plain, extents only from version 2 on and never overlapping,
/// every front inside its file.
///
/// # Errors
/// [`Error::InvalidMetadata`] naming `path` and the file at fault.
pub(crate) fn check_entries(
    path: &Path,
    version: u32,
    files: &BTreeMap<String, StateFile>,
) -> Result<()> {
    for (rel, f) in files {
        if !plain_key(rel) || !f.keys().into_iter().all(plain_key) {
            return Err(Error::metadata(
                path,
                format!("file {rel:?} is not a plain path inside the dataset"),
            ));
        }
        if let StateFile::Extents { .. } = f {
            if version < STATE_VERSION_EXTENTS {
                return Err(Error::metadata(
                    path,
                    format!(
                        "file {rel:?} is held in extents, which a state of version {} \
                             cannot hold",
                        version
                    ),
                ));
            }
            if let Some(why) = f.extents_fault() {
                return Err(Error::metadata(path, format!("file {rel:?}: {why}")));
            }
        }
        if let StateFile::Object {
            len,
            front: Some(front),
            ..
        }
        | StateFile::Extents {
            len,
            front: Some(front),
            ..
        } = f
        {
            if let Some(why) = front.fault(*len) {
                return Err(Error::metadata(path, format!("file {rel:?}: {why}")));
            }
        }
    }
    Ok(())
}

/// The error of a manifest object `path` of `got` bytes that its state says are `want`.
pub(crate) fn wrong_size(path: &Path, got: u64, want: u64) -> Error {
    Error::metadata(
        path,
        format!("the manifest object is {got} bytes, where the state says {want}"),
    )
}
