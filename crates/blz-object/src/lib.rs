//! The object-store backend (the `s3` feature): one dataset on an S3-compatible object store,
//! seen by the rest of blz as a directory tree.
//!
//! Objects are never modified in place. The dataset's committed state is one small object,
//! `<root>/meta/state`, that lists every file of the dataset (the object holding it and its
//! length, or its text inline for small meta documents). [`ObjectStorage`] loads that state
//! once, when it is made: a reader keeps reading that snapshot (immutable objects) whatever
//! writers commit meanwhile.
//!
//! Everything written through it (the transaction's positioned writes, atomic replacements,
//! renames, removals, whole staged creates) changes only a local overlay: new or changed
//! files are spooled to anonymous temporary files that hold the bytes written (the bytes of
//! an existing file not written stay in its objects, fetched only when read).
//! [`Storage::publish`] of the dataset root uploads, for every spooled file, the bytes
//! written (or the whole file, when it is new or too fragmented) under a new, writer-unique
//! key, in parallel, the file's entry listing its extents, then replaces the state
//! object with a conditional write (If-Match on the ETag it loaded, or create-if-absent for a
//! new dataset): that write is the commit. A writer that lost the race gets
//! [`Error::Conflict`]; its uploads are orphans that [`collect_garbage`] removes. The state
//! object and the collection rule are described in `spec/object-store.md`.

// The library never unwraps, expects or panics on a user's path: errors are values.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod manifest;

use blz_format::blpk::BlockIndex;
use blz_format::error::{Error, Result};
use blz_format::storage::{
    FrontRanges, LockGuard, OpenMode, SharedDir, Storage, StorageFile, STAGING_SUFFIX,
};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use manifest::{Manifest, ManifestDoc};
use object_store::path::Path as OPath;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    UpdateVersion,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The `format` value of a state object.
pub const STATE_FORMAT: &str = "blz-object-state";
/// The state object's newest layout version, which this build reads and writes when the
/// state names manifests ([`State::manifests`]); a state without them is written as
/// [`STATE_VERSION_EXTENTS`] when a file is held in extents, else as
/// [`STATE_VERSION_WHOLE`], so that earlier builds read it.
pub const STATE_VERSION: u32 = 3;
/// The state object's layout version that holds files in extents ([`StateFile::Extents`]).
pub const STATE_VERSION_EXTENTS: u32 = 2;
/// The state object's first layout version: every file whole in one object, or inline.
pub const STATE_VERSION_WHOLE: u32 = 1;
/// Most extents a file's entry lists: a commit that would list more rewrites the file whole
/// as one object (`spec/object-store.md` §4).
pub const MAX_EXTENTS: usize = 16;
/// Where the state object lives, relative to the dataset's prefix.
pub const STATE_KEY: &str = "meta/state";
/// The first bytes of an object read (and kept) on its first read: a superchunk's header,
/// metadata and offsets table come with one request.
const HEAD_BLOCK: u64 = 64 << 10;
/// Meta documents up to this size are kept inline in the state object.
const INLINE_MAX: usize = 16 << 10;
/// Uploads (and deletions) in flight at once.
const PARALLEL: usize = 16;
/// The most bytes, in MiB, that this process's uploads in flight hold in memory at once (an
/// upload holds its object's bytes, up to all of this for a larger one).
const UPLOAD_BUDGET_MIB: u32 = 256;
/// The superchunk file size a new dataset on an object store aims for when its creator
/// names none ([`Storage::file_bytes`]): 16 MiB, the size of part an S3 client is advised to
/// move per request, against 64 MiB on a filesystem. One 8 MB chunk of a 1e7-element
/// float64 array then goes up and comes down with its neighbour, five objects in flight
/// where 64 MiB files gave two.
pub const OBJECT_FILE_BYTES: u64 = 16 << 20;
/// Largest state object blz reads.
const MAX_STATE: u64 = 64 << 20;
/// Largest front matter of one file kept in the state object ([`Front`]): a larger one is
/// read from the file's object.
pub const MAX_FRONT: u64 = 1 << 20;
/// Most bytes of block indexes ([`Front::blocks`]) one state carries, unless a handle sets
/// another bound ([`ObjectStorage::set_inline_block_indexes`]): past it, files (in path
/// order) keep theirs in an object of their own ([`Front::blocks_object`]).
pub const MAX_BLOCK_INDEXES: u64 = 1 << 20;

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

/// An object a file held in extents reads from ([`StateFile::Extents`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtentObject {
    /// The object's key below the dataset's prefix.
    pub key: String,
    /// The object's size in bytes.
    pub size: u64,
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
    fn front(&self) -> Option<&Front> {
        match self {
            StateFile::Object { front, .. } | StateFile::Extents { front, .. } => front.as_ref(),
            StateFile::Inline { .. } => None,
        }
    }

    /// Where the entry keeps its front (`None` for an inline file, which has none).
    fn front_mut(&mut self) -> Option<&mut Option<Front>> {
        match self {
            StateFile::Object { front, .. } | StateFile::Extents { front, .. } => Some(front),
            StateFile::Inline { .. } => None,
        }
    }

    /// What is wrong with an extents entry, if anything.
    fn extents_fault(&self) -> Option<String> {
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

/// A piece of a file: `len` bytes of the object `key` (of `size` bytes) from its byte `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    key: Arc<str>,
    size: u64,
    at: u64,
    len: u64,
}

/// The pieces holding a file of the state, in order (none for an inline file).
fn pieces_of(f: &StateFile) -> Vec<Piece> {
    match f {
        StateFile::Object { key, len, .. } if *len > 0 => vec![Piece {
            key: Arc::from(key.as_str()),
            size: *len,
            at: 0,
            len: *len,
        }],
        StateFile::Extents {
            objects, extents, ..
        } => {
            let keys: Vec<Arc<str>> = objects.iter().map(|o| Arc::from(o.key.as_str())).collect();
            extents
                .iter()
                .filter_map(|&[o, at, len]| {
                    let o = usize::try_from(o).ok()?;
                    Some(Piece {
                        key: Arc::clone(keys.get(o)?),
                        size: objects.get(o)?.size,
                        at,
                        len,
                    })
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The state entry of a file of `len` bytes held by `pieces`: one whole object in the
/// first form, else extents.
fn entry_of(pieces: &[Piece], len: u64, front: Option<Front>) -> StateFile {
    match pieces {
        [p] if p.at == 0 && p.len == p.size => StateFile::Object {
            key: p.key.to_string(),
            len,
            front,
        },
        _ => {
            let mut objects: Vec<ExtentObject> = Vec::new();
            let mut extents = Vec::with_capacity(pieces.len());
            for p in pieces {
                let i = match objects.iter().position(|o| *o.key == *p.key) {
                    Some(i) => i,
                    None => {
                        objects.push(ExtentObject {
                            key: p.key.to_string(),
                            size: p.size,
                        });
                        objects.len() - 1
                    }
                };
                extents.push([i as u64, p.at, p.len]);
            }
            StateFile::Extents {
                len,
                objects,
                extents,
                front,
            }
        }
    }
}

/// The pieces holding the file bytes `range`, cut to it, in order. Bytes past the pieces
/// are left out.
fn slice_pieces(pieces: &[Piece], range: std::ops::Range<u64>) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut start = 0u64;
    for p in pieces {
        let end = start + p.len;
        let (a, b) = (range.start.max(start), range.end.min(end));
        if a < b {
            out.push(Piece {
                key: Arc::clone(&p.key),
                size: p.size,
                at: p.at + (a - start),
                len: b - a,
            });
        }
        if end >= range.end {
            break;
        }
        start = end;
    }
    out
}

/// Joins neighbouring pieces that continue each other in one object.
fn join_pieces(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for p in pieces {
        match out.last_mut() {
            Some(q) if q.key == p.key && q.at + q.len == p.at => q.len += p.len,
            _ => out.push(p),
        }
    }
    out
}

/// Adds `r` to a set of sorted, apart ranges, merging those it touches.
fn add_range(set: &mut Vec<std::ops::Range<u64>>, r: std::ops::Range<u64>) {
    if r.is_empty() {
        return;
    }
    let (mut start, mut end) = (r.start, r.end);
    let mut out = Vec::with_capacity(set.len() + 1);
    let mut placed = false;
    for s in set.drain(..) {
        if s.end < start {
            out.push(s);
        } else if s.start > end {
            if !placed {
                out.push(start..end);
                placed = true;
            }
            out.push(s);
        } else {
            start = start.min(s.start);
            end = end.max(s.end);
        }
    }
    if !placed {
        out.push(start..end);
    }
    *set = out;
}

/// Cuts a set of sorted ranges to below `n`.
fn clip_ranges(set: &mut Vec<std::ops::Range<u64>>, n: u64) {
    set.retain(|r| r.start < n);
    if let Some(last) = set.last_mut() {
        last.end = last.end.min(n);
    }
}

/// A copy of the bytes of a file that every reader of it reads before anything else (a
/// superchunk file's header, metadata section and offsets table), kept in the state object
/// so that reading a chunk of the file is one request (`spec/object-store.md` §3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Front {
    /// The byte ranges copied, each `[start, length]`: in increasing order, apart, none
    /// empty, inside the file, [`MAX_FRONT`] bytes at most in all.
    pub ranges: Vec<[u64; 2]>,
    /// The ranges' bytes, concatenated in order, compressed with zlib (RFC 1950) and
    /// encoded in base64 (RFC 4648, standard alphabet, padded).
    pub zlib: String,
    /// The file's block index ([`blz_format::blpk::encode_index`]: for chunks of a superchunk
    /// file, their Blosc headers, block starts and blocks' CRC-32s), compressed with zlib
    /// and encoded in base64 as `zlib` is; absent when the writer kept none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<String>,
    /// Where the file's block index lies when the state does not carry it (past the
    /// state's budget of block indexes, [`ObjectStorage::set_inline_block_indexes`]): an
    /// object, its key below the dataset's prefix and its size, holding what `blocks`
    /// would hold before base64 (the zlib stream). Never beside `blocks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks_object: Option<ExtentObject>,
}

impl Front {
    /// The copy of `ranges` of a file, given their bytes concatenated.
    fn new(ranges: &[std::ops::Range<u64>], bytes: &[u8]) -> Option<Front> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(bytes).ok()?;
        Some(Front {
            ranges: ranges.iter().map(|r| [r.start, r.end - r.start]).collect(),
            zlib: base64_encode(&z.finish().ok()?),
            blocks: None,
            blocks_object: None,
        })
    }

    /// The front with `index` as its block index (none when it is empty, or encodes to more
    /// than [`MAX_FRONT`] bytes).
    fn with_blocks(mut self, index: Option<&BlockIndex>) -> Front {
        self.blocks_object = None;
        self.blocks = index
            .filter(|i| !i.is_empty() && blz_format::blpk::encoded_len(i) <= MAX_FRONT)
            .map(|i| base64_encode(&blz_format::blpk::compress_index(i)));
        self
    }

    /// What is wrong with it for a file of `len` bytes, if anything.
    fn fault(&self, len: u64) -> Option<String> {
        let mut at = 0u64;
        let mut total = 0u64;
        for (i, &[start, n]) in self.ranges.iter().enumerate() {
            let end = start.checked_add(n).filter(|&e| e <= len);
            if n == 0 || (i > 0 && start <= at) || end.is_none() {
                return Some(format!(
                    "front range {i} ([{start}, {n}]) is empty, out of order or past the \
                     file's {len} bytes"
                ));
            }
            at = end.unwrap_or(len);
            total += n;
        }
        if self.blocks.is_some() && self.blocks_object.is_some() {
            return Some("a front with both blocks and blocks_object".into());
        }
        (total > MAX_FRONT).then(|| format!("front of {total} bytes, over {MAX_FRONT}"))
    }

    fn total(&self) -> u64 {
        self.ranges.iter().map(|r| r[1]).sum()
    }
}

/// A file's [`Front`] as a reader holds it: decoded on its first use.
struct FrontCopy {
    front: Front,
    bytes: OnceLock<std::result::Result<Bytes, String>>,
    blocks: OnceLock<std::result::Result<Option<Arc<BlockIndex>>, String>>,
    /// The block index read from the front's `blocks_object`, decoded, once it was read
    /// (a failed read is not kept: the next use reads again).
    fetched: OnceLock<std::result::Result<Arc<BlockIndex>, String>>,
}

impl FrontCopy {
    fn new(front: Front) -> Arc<FrontCopy> {
        Arc::new(FrontCopy {
            front,
            bytes: OnceLock::new(),
            blocks: OnceLock::new(),
            fetched: OnceLock::new(),
        })
    }

    /// The block index the front carries, decoded (`None` when it carries none; see
    /// [`Backend::front_index`] for one in an object of its own).
    fn block_index(&self) -> std::result::Result<Option<&Arc<BlockIndex>>, String> {
        self.blocks
            .get_or_init(|| {
                let Some(b) = &self.front.blocks else {
                    return Ok(None);
                };
                decode_packed_index(&base64_decode(b).ok_or("a block index that is not base64")?)
                    .map(|i| Some(Arc::new(i)))
            })
            .as_ref()
            .map(Option::as_ref)
            .map_err(String::clone)
    }

    /// Where the file's bytes `start..end` lie in the decoded copy, if they lie in one range.
    fn find(&self, start: u64, end: u64) -> Option<usize> {
        let mut at = 0u64;
        for &[s, n] in &self.front.ranges {
            if s <= start && end <= s + n {
                return usize::try_from(at + (start - s)).ok();
            }
            at += n;
        }
        None
    }

    /// The ranges' bytes, concatenated.
    fn bytes(&self) -> std::result::Result<&Bytes, String> {
        self.bytes
            .get_or_init(|| {
                let total = self.front.total();
                let out = unpack(&self.front.zlib, total, "a front")?;
                if out.len() as u64 != total {
                    return Err(format!(
                        "a front of {} bytes where its ranges hold {total}",
                        out.len()
                    ));
                }
                Ok(Bytes::from(out))
            })
            .as_ref()
            .map_err(String::clone)
    }
}

/// The bytes of `text`, base64 of zlib (as the state keeps fronts and block indexes),
/// decompressed to at most `limit + 1` bytes (one more than allowed tells the caller it was
/// too long); `what` names it in the error.
fn unpack(text: &str, limit: u64, what: &str) -> std::result::Result<Vec<u8>, String> {
    let packed = base64_decode(text).ok_or_else(|| format!("{what} that is not base64"))?;
    inflate(&packed, limit, what)
}

/// The zlib stream `packed` inflated, `limit + 1` bytes at most (so that a caller sees
/// when it was more); `what` names it in the error.
fn inflate(packed: &[u8], limit: u64, what: &str) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::ZlibDecoder::new(packed)
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{what} that does not decompress: {e}"))?;
    Ok(out)
}

/// `state`'s JSON, at most `max` bytes long: when it is longer, files' fronts (copies of
/// bytes their objects hold, which a reader can do without, `spec/object-store.md` §3) are
/// left out, from the last file in path order back, until it fits.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the state object `path` when the state is longer than
/// `max` bytes without any front (a dataset of more files than one state can name).
fn state_bytes(state: &mut State, max: u64, path: &Path) -> Result<Vec<u8>> {
    let json = |s: &State| {
        s.to_json()
            .map_err(|e| Error::metadata(path, e.to_string()))
    };
    let mut bytes = json(state)?;
    if bytes.len() as u64 <= max {
        return Ok(bytes);
    }
    // The files the state object holds, in reverse path order, taken one by one across the
    // rounds below.
    let held = state.held();
    let order: Vec<String> = state
        .files
        .keys()
        .rev()
        .filter(|p| !held.contains(p.as_str()))
        .cloned()
        .collect();
    drop(held);
    let mut next = order.iter();
    while bytes.len() as u64 > max {
        // Fronts out until the bytes they take (as `,"front":{...}`) make up the excess.
        let mut over = bytes.len() as u64 - max;
        let mut dropped = false;
        for rel in next.by_ref() {
            let front = state.files.get_mut(rel).and_then(StateFile::front_mut);
            if let Some(fr) = front.and_then(Option::take) {
                dropped = true;
                let took = serde_json::to_vec(&fr).map_or(0, |b| b.len() as u64) + 9;
                over = over.saturating_sub(took);
                if over == 0 {
                    break;
                }
            }
        }
        if !dropped {
            return Err(Error::InvalidArgument(format!(
                "{}: the dataset's state would take {} bytes with no file's front, over the \
                 {max} a reader reads: too many files (larger superchunk files make fewer)",
                path.display(),
                bytes.len()
            )));
        }
        bytes = json(state)?;
    }
    Ok(bytes)
}

/// A block index as a front's `blocks` holds it once out of base64, or its
/// `blocks_object` holds it (a zlib stream of at most [`MAX_FRONT`] bytes), decoded.
fn decode_packed_index(packed: &[u8]) -> std::result::Result<BlockIndex, String> {
    let raw = inflate(packed, MAX_FRONT, "a block index")?;
    if raw.len() as u64 > MAX_FRONT {
        return Err(format!("a block index over {MAX_FRONT} bytes"));
    }
    blz_format::blpk::decode_index(&raw)
}

/// Base64 (RFC 4648, standard alphabet, padded), as the state writes fronts.
fn base64_encode(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// The bytes of standard padded base64 text, `None` when it is not that.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// An object a commit stopped using, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retired {
    /// The object's key below the dataset's prefix.
    pub key: String,
    /// When the commit that stopped using it was made (seconds since the Unix epoch, by the
    /// writer's clock: for people; [`collect_garbage`] does not trust it).
    pub at: u64,
    /// The generation of the commit that stopped using it (absent in states written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// A time at or after which the state that stopped using it was stored, by the store's
    /// clock (seconds since the Unix epoch): the Last-Modified of a state that no longer used
    /// it, set by the next writer that read that state. Absent until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_by: Option<u64>,
}

/// The state object, `<root>/meta/state` (`spec/object-store.md`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Always [`STATE_FORMAT`].
    pub format: String,
    /// Always [`STATE_VERSION`].
    pub version: u32,
    /// 1 for a new dataset, one more at every commit.
    pub generation: u64,
    /// When this state was committed (seconds since the Unix epoch).
    pub committed_at: u64,
    /// Every file of the dataset, by its path relative to the dataset root (`/`-separated).
    pub files: BTreeMap<String, StateFile>,
    /// Objects no longer used, not yet collected.
    #[serde(default)]
    pub retired: Vec<Retired>,
    /// The write id of the conditional write that stored this state: 32 lowercase
    /// hexadecimal digits drawn at random by the writer for that one write. A writer whose
    /// write failed or lost its answer reads the state back and finds its id here (or in
    /// [`State::earlier_write_ids`]) when the write took effect. Absent in states written
    /// before write ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_id: Option<String>,
    /// The write ids of the states this one replaced, oldest first, the last
    /// [`EARLIER_WRITE_IDS`] at most: a writer whose write took effect and was at once
    /// replaced by another writer's still learns that it took effect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_write_ids: Vec<String>,
    /// The manifests holding some of the files' entries (state version 3): in memory their
    /// entries are in [`State::files`] too; the state object holds the other files' entries
    /// and this list (`spec/object-store.md` §3). Absent means none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<Manifest>,
}

/// A state as its object holds it: the entries of the files no manifest holds.
#[derive(Serialize)]
struct StateOut<'a> {
    format: &'a str,
    version: u32,
    generation: u64,
    committed_at: u64,
    files: BTreeMap<&'a str, &'a StateFile>,
    retired: &'a [Retired],
    #[serde(skip_serializing_if = "Option::is_none")]
    write_id: &'a Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    earlier_write_ids: &'a Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    manifests: &'a Vec<Manifest>,
}

impl State {
    /// A first state (generation 1, nothing retired, no write id) holding `files`, some of
    /// them in `manifests`, of the version they need.
    #[cfg(test)]
    pub(crate) fn first(files: BTreeMap<String, StateFile>, manifests: Vec<Manifest>) -> State {
        State {
            format: STATE_FORMAT.into(),
            version: State::version_for(&files, &manifests),
            generation: 1,
            committed_at: 0,
            files,
            retired: Vec::new(),
            write_id: None,
            earlier_write_ids: Vec::new(),
            manifests,
        }
    }

    /// The layout version a state holding `files`, some of them in `manifests`, is written
    /// as: the lowest that holds them, so that earlier builds read it when they can.
    fn version_for(files: &BTreeMap<String, StateFile>, manifests: &[Manifest]) -> u32 {
        if !manifests.is_empty() {
            STATE_VERSION
        } else if files
            .values()
            .any(|f| matches!(f, StateFile::Extents { .. }))
        {
            STATE_VERSION_EXTENTS
        } else {
            STATE_VERSION_WHOLE
        }
    }

    /// The paths of the files a manifest holds.
    fn held(&self) -> HashSet<&str> {
        self.manifests
            .iter()
            .flat_map(|m| m.paths.iter().map(String::as_str))
            .collect()
    }

    /// The state object's JSON: the files no manifest holds, and the manifests.
    fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        let held = self.held();
        serde_json::to_vec(&StateOut {
            format: &self.format,
            version: self.version,
            generation: self.generation,
            committed_at: self.committed_at,
            files: self
                .files
                .iter()
                .filter(|(p, _)| !held.contains(p.as_str()))
                .map(|(p, f)| (p.as_str(), f))
                .collect(),
            retired: &self.retired,
            write_id: &self.write_id,
            earlier_write_ids: &self.earlier_write_ids,
            manifests: &self.manifests,
        })
    }
}

/// How many write ids of earlier states a state keeps ([`State::earlier_write_ids`]).
pub const EARLIER_WRITE_IDS: usize = 31;

impl State {
    /// Stamps `self` as the state a new conditional write stores: a fresh write id, the
    /// previous one (`self`'s, if any) pushed onto the earlier ones.
    fn stamp_write(&mut self) {
        if let Some(prev) = self.write_id.take() {
            self.earlier_write_ids.push(prev);
        }
        let excess = self
            .earlier_write_ids
            .len()
            .saturating_sub(EARLIER_WRITE_IDS);
        self.earlier_write_ids.drain(..excess);
        self.write_id = Some(format!("{:032x}", rand::random::<u128>()));
    }

    /// Whether the conditional write with id `id` took effect, as this state (read after it)
    /// tells.
    fn records_write(&self, id: &str) -> bool {
        self.write_id.as_deref() == Some(id) || self.earlier_write_ids.iter().any(|w| w == id)
    }
}

fn now_secs() -> u64 {
    unix_secs(SystemTime::now())
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The tokio runtime every object-store call runs on, made on first use.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    // One per process: a child forked after it was made has none of its threads (and
    // must not drive its reactor, whose epoll instance it shares with the parent).
    static RT: blz_format::process::PerProcess<tokio::runtime::Runtime> =
        blz_format::process::PerProcess::new();
    RT.get_or_try_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("blz-object-store")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .map_err(|e| {
        Error::io(
            "start the object-store runtime",
            "s3://",
            std::io::Error::other(e.clone()),
        )
    })
}

fn store_error(op: &'static str, path: &Path, e: object_store::Error) -> Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        _ => ErrorKind::Other,
    };
    Error::io(op, path, std::io::Error::new(kind, e))
}

fn not_found(op: &'static str, path: &Path) -> Error {
    Error::io(
        op,
        path,
        std::io::Error::new(ErrorKind::NotFound, "no such file"),
    )
}

/// Objects larger than this are uploaded in parts ([`put_object`]): above a default
/// superchunk file, so that those go up in one request (one PUT is cheaper for a server
/// than parts it must join, and as fast at these sizes).
pub const MULTIPART_MIN: usize = 64 << 20;

/// The size of each part of a multipart upload (the last one shorter); S3 wants 5 MiB at
/// least of every part but the last.
pub const UPLOAD_PART: usize = 8 << 20;

/// Uploads `bytes` as the object `loc`: one PUT, or, above [`MULTIPART_MIN`] bytes, a
/// multipart upload whose parts of [`UPLOAD_PART`] bytes go up at once (the object appears
/// whole when the upload completes; a failed part aborts it).
async fn put_object(
    store: &Arc<dyn ObjectStore>,
    loc: &OPath,
    bytes: Bytes,
) -> std::result::Result<(), object_store::Error> {
    if bytes.len() <= MULTIPART_MIN {
        return store
            .put(loc, PutPayload::from_bytes(bytes))
            .await
            .map(drop);
    }
    let mut upload = store.put_multipart(loc).await?;
    let parts: Vec<_> = (0..bytes.len())
        .step_by(UPLOAD_PART)
        .map(|a| {
            let part = bytes.slice(a..(a + UPLOAD_PART).min(bytes.len()));
            upload.put_part(PutPayload::from_bytes(part))
        })
        .collect();
    match futures::future::try_join_all(parts).await {
        Ok(_) => upload.complete().await.map(drop),
        Err(e) => {
            let _ = upload.abort().await;
            Err(e)
        }
    }
}

/// The parts an upload of `len` bytes takes, for the request log.
fn parts_note(len: usize) -> String {
    if len <= MULTIPART_MIN {
        String::new()
    } else {
        format!("multipart parts={}", len.div_ceil(UPLOAD_PART))
    }
}

/// What kind of failure to reach the endpoint an `object_store` error is, if it is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unreachable {
    /// No connection within the connect timeout.
    ConnectTimeout,
    /// Connected, then no answer (or no progress) in time.
    Timeout,
    /// The connection was refused or failed.
    Connect,
}

fn unreachable(e: &object_store::Error) -> Option<Unreachable> {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut found = None;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<HttpError>() {
            match h.kind() {
                HttpErrorKind::Timeout => found = Some(Unreachable::Timeout),
                HttpErrorKind::Connect => found = found.or(Some(Unreachable::Connect)),
                _ => {}
            }
        }
        if let Some(r) = err.downcast_ref::<reqwest::Error>() {
            if r.is_timeout() && r.is_connect() {
                return Some(Unreachable::ConnectTimeout);
            }
        }
        cur = err.source();
    }
    found
}

/// Where a request goes: through the client that bounds time without progress (reads) or
/// the one that does not (writes, whose sending the HTTP client counts as waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Read,
    Write,
}

/// The object store and what every file handle needs of it.
#[derive(Debug)]
struct Backend {
    store: Arc<dyn ObjectStore>,
    /// The client for uploads, commits and deletions (the same as `store` for a store
    /// given by the caller).
    write_store: Arc<dyn ObjectStore>,
    /// The endpoint and timeouts of an S3 client made from the environment (for messages).
    endpoint: Option<(String, S3Timeouts)>,
    /// The key prefix of the dataset root (no trailing `/`).
    prefix: String,
    /// The dataset root as callers name it (`s3://bucket/prefix`).
    root: PathBuf,
    requests: AtomicU64,
    /// Where every request is recorded, one line each ([`REQUEST_LOG_VAR`]).
    log: Option<Arc<std::fs::File>>,
    /// How reads of many ranges become requests, and the slots that bound the requests of
    /// reads in flight at once ([`ReadTuning::concurrency`]).
    reads: Mutex<(ReadTuning, Arc<tokio::sync::Semaphore>)>,
    /// The bytes of block indexes a commit puts in the state, at most
    /// ([`ObjectStorage::set_inline_block_indexes`]).
    inline_indexes: AtomicU64,
    /// The bytes of unchanged entries a commit gathers in the state before sealing them
    /// into a manifest ([`ObjectStorage::set_manifest_bytes`]); 0 seals none.
    manifest_bytes: AtomicU64,
}

/// How a read of many byte ranges of a file (the chunks a selection needs) becomes
/// requests (`spec/object-store.md` §1, §4): ranges of one object at most
/// [`coalesce`](Self::coalesce) bytes apart are read by one ranged GET; a GET longer than
/// [`part_size`](Self::part_size) is split into parts read at once; at most
/// [`concurrency`](Self::concurrency) GETs of reads are in flight at once per handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadTuning {
    /// The largest gap, in bytes, between two ranges of one object read by one request
    /// (`BLZ_S3_COALESCE`; 1 MiB, as `object_store`'s `get_ranges`). Adjacent ranges are
    /// always read together.
    pub coalesce: u64,
    /// The longest request, in bytes: a longer run is read in parts of this size at most,
    /// at once (`BLZ_S3_PART_SIZE`; 16 MiB; at least 1).
    pub part_size: u64,
    /// Most ranged GETs of reads in flight at once, per dataset handle
    /// (`BLZ_S3_CONCURRENCY`; 32; at least 1).
    pub concurrency: usize,
}

impl Default for ReadTuning {
    fn default() -> Self {
        ReadTuning::DEFAULT
    }
}

impl ReadTuning {
    /// 1 MiB of gap merged, parts of 16 MiB, 32 requests in flight.
    pub const DEFAULT: ReadTuning = ReadTuning {
        coalesce: object_store::OBJECT_STORE_COALESCE_DEFAULT,
        part_size: 16 << 20,
        concurrency: 32,
    };

    /// The settings the environment of this process gives (unset or empty variables
    /// leave the [`DEFAULT`](Self::DEFAULT)).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a variable whose value is not a whole number (at
    /// least 1 for the part size and the concurrency).
    pub fn from_env() -> Result<ReadTuning> {
        ReadTuning::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings the variables `var` returns give (`var(name)` is the value of the
    /// environment variable `name`, if set).
    ///
    /// # Errors
    /// As [`ReadTuning::from_env`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<ReadTuning> {
        let d = ReadTuning::DEFAULT;
        let num = |name: &str, min: u64, default: u64| -> Result<u64> {
            match var(name).filter(|v| !v.trim().is_empty()) {
                None => Ok(default),
                Some(v) => v
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n >= min)
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "{name}={v:?}: expected a whole number{}",
                            if min > 0 { " of at least 1" } else { "" }
                        ))
                    }),
            }
        };
        Ok(ReadTuning {
            coalesce: num("BLZ_S3_COALESCE", 0, d.coalesce)?,
            part_size: num("BLZ_S3_PART_SIZE", 1, d.part_size)?,
            concurrency: usize::try_from(num("BLZ_S3_CONCURRENCY", 1, d.concurrency as u64)?)
                .unwrap_or(usize::MAX),
        })
    }

    /// `span` cut into the requests that read it: parts of [`part_size`](Self::part_size)
    /// bytes, the last one shorter.
    fn parts(&self, span: std::ops::Range<u64>) -> Vec<std::ops::Range<u64>> {
        let step = self.part_size.max(1);
        let mut out = Vec::new();
        let mut at = span.start;
        while at < span.end {
            let end = at.saturating_add(step).min(span.end);
            out.push(at..end);
            at = end;
        }
        out
    }
}

/// The environment variable bounding the bytes of block indexes a commit puts in the state
/// (`spec/object-store.md` §1, §3): a whole number; unset or empty, [`MAX_BLOCK_INDEXES`].
pub const INLINE_INDEXES_VAR: &str = "BLZ_S3_INLINE_INDEXES";

/// The number of bytes the environment variable `var` sets for the handles of this process
/// ([`INLINE_INDEXES_VAR`], [`manifest::MANIFEST_BYTES_VAR`]): `default` when it is unset or
/// empty.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the variable when its value is not a whole number.
fn bytes_from_env(var: &str, default: u64) -> Result<u64> {
    match std::env::var(var).ok().filter(|v| !v.trim().is_empty()) {
        None => Ok(default),
        Some(v) => v.trim().parse::<u64>().map_err(|_| {
            Error::InvalidArgument(format!("{var}={v:?}: expected a whole number of bytes"))
        }),
    }
}

/// The slots of `t.concurrency` requests in flight.
fn read_slots(t: &ReadTuning) -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(
        t.concurrency.clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
    ))
}

/// Why a fetch of ranges failed, told apart outside the runtime (a missing object is
/// explained by reading the state again, which blocks).
enum FetchFailure {
    /// A request failed: the object it asked, when it started, the store's error.
    Store {
        key: String,
        started: std::time::Instant,
        error: object_store::Error,
    },
    /// An answer shorter than the range asked.
    Short,
    /// An answer naming an object of another size than the state gives it.
    Size { key: String, got: u64, want: u64 },
}

/// The environment variable naming a file to which every request of an `s3://` handle
/// appends one line (`spec/object-store.md` §1): `METHOD URL`, then `bytes=A-B` for a
/// ranged read and `if-match` or `if-none-match` for a conditional write. For tests and
/// for seeing what a command costs; unset, nothing is recorded.
pub const REQUEST_LOG_VAR: &str = "BLZ_S3_REQUEST_LOG";

/// The file [`REQUEST_LOG_VAR`] names, opened to append once per process (`None` when the
/// variable is unset or empty).
fn request_log() -> Result<Option<Arc<std::fs::File>>> {
    static LOG: OnceLock<std::result::Result<Option<Arc<std::fs::File>>, String>> = OnceLock::new();
    LOG.get_or_init(|| {
        let Some(p) = std::env::var_os(REQUEST_LOG_VAR).filter(|p| !p.is_empty()) else {
            return Ok(None);
        };
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .map(|f| Some(Arc::new(f)))
            .map_err(|e| format!("{REQUEST_LOG_VAR}={}: {e}", Path::new(&p).display()))
    })
    .clone()
    .map_err(Error::InvalidArgument)
}

impl Backend {
    /// Uploads `bytes` as the object `key` (relative to the prefix; [`put_object`]: in parts
    /// when large), recorded in the request log; a failure is the error of an upload of the
    /// file `path`.
    async fn upload(&self, key: &str, path: &Path, bytes: Bytes) -> Result<()> {
        self.note("PUT", key, format_args!("{}", parts_note(bytes.len())));
        let started = std::time::Instant::now();
        put_object(self.client(Client::Write), &self.key(key), bytes)
            .await
            .map_err(|e| self.error("upload", path, Client::Write, started, e))
    }

    /// The backend of the dataset under `prefix` in `store`, named `<base>/<prefix>`, with
    /// the default read settings (no endpoint, no request log).
    fn in_store(store: Arc<dyn ObjectStore>, base: &Path, prefix: &str) -> Backend {
        let prefix = prefix.trim_matches('/').to_string();
        let tuning = ReadTuning::DEFAULT;
        Backend {
            write_store: Arc::clone(&store),
            store,
            endpoint: None,
            root: base.join(&prefix),
            prefix,
            requests: AtomicU64::new(0),
            log: None,
            reads: Mutex::new((tuning, read_slots(&tuning))),
            inline_indexes: AtomicU64::new(MAX_BLOCK_INDEXES),
            manifest_bytes: AtomicU64::new(manifest::MANIFEST_BYTES),
        }
    }

    /// The objects below `s3://bucket/key`, with S3 clients and read settings from the
    /// environment, and the bucket's name.
    fn for_url(url: &str) -> Result<(Backend, String)> {
        let (bucket, key) = parse_s3_url(url)?;
        let c = s3_clients(&bucket)?;
        let tuning = ReadTuning::from_env()?;
        let backend = Backend {
            store: c.read,
            write_store: c.write,
            endpoint: Some((c.endpoint, c.timeouts)),
            root: PathBuf::from(format!("s3://{bucket}/{key}")),
            prefix: key,
            requests: AtomicU64::new(0),
            log: request_log()?,
            reads: Mutex::new((tuning, read_slots(&tuning))),
            inline_indexes: AtomicU64::new(bytes_from_env(INLINE_INDEXES_VAR, MAX_BLOCK_INDEXES)?),
            manifest_bytes: AtomicU64::new(bytes_from_env(
                manifest::MANIFEST_BYTES_VAR,
                manifest::MANIFEST_BYTES,
            )?),
        };
        Ok((backend, bucket))
    }

    /// The same store and clients for the objects below `rel` (a key relative to this
    /// prefix), named `<root>/<rel>`; requests are counted apart.
    fn below(&self, rel: &str) -> Backend {
        let tuning = self.read_tuning().0;
        Backend {
            store: Arc::clone(&self.store),
            write_store: Arc::clone(&self.write_store),
            endpoint: self.endpoint.clone(),
            prefix: if self.prefix.is_empty() {
                rel.to_string()
            } else {
                format!("{}/{rel}", self.prefix)
            },
            root: self.root.join(rel),
            requests: AtomicU64::new(0),
            log: self.log.clone(),
            reads: Mutex::new((tuning, read_slots(&tuning))),
            inline_indexes: AtomicU64::new(self.inline_indexes.load(Ordering::Relaxed)),
            manifest_bytes: AtomicU64::new(self.manifest_bytes.load(Ordering::Relaxed)),
        }
    }

    /// Deletes the objects `keys` (relative to the prefix), [`PARALLEL`] at a time; one
    /// already gone is no error.
    fn delete_all<'k>(&self, keys: impl IntoIterator<Item = &'k String>) -> Result<()> {
        let rt = runtime()?;
        let store = Arc::clone(self.client(Client::Write));
        let started = std::time::Instant::now();
        rt.block_on(async {
            futures::stream::iter(keys)
                .map(|key| {
                    let store = Arc::clone(&store);
                    let loc = self.key(key);
                    self.note("DELETE", key, format_args!(""));
                    async move {
                        match store.delete(&loc).await {
                            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                            Err(e) => Err(e),
                        }
                    }
                })
                .buffer_unordered(PARALLEL)
                .try_collect::<Vec<()>>()
                .await
        })
        .map_err(|e| self.error("delete", &self.root, Client::Write, started, e))
        .map(drop)
    }

    fn key(&self, rel_key: &str) -> OPath {
        if self.prefix.is_empty() {
            OPath::from(rel_key)
        } else {
            OPath::from(format!("{}/{rel_key}", self.prefix))
        }
    }

    /// Counts one request (`method` of the object `key`, relative to the prefix; `what`
    /// says more: a range, a condition) and records it in the request log, if there is one.
    fn note(&self, method: &str, key: &str, what: std::fmt::Arguments<'_>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if let Some(log) = &self.log {
            use std::io::Write;
            let mut line = format!("{method} {}/{key} {what}", self.root.display());
            line.truncate(line.trim_end().len());
            line.push('\n');
            // One write of a short line to a file opened to append: lines of concurrent
            // requests (and processes) do not interleave. The log is a diagnostic: a
            // failure to write it fails no request.
            let _ = (&**log).write_all(line.as_bytes());
        }
    }

    /// The client for `client`'s requests.
    fn client(&self, client: Client) -> &Arc<dyn ObjectStore> {
        match client {
            Client::Read => &self.store,
            Client::Write => &self.write_store,
        }
    }

    /// An `object_store` error of a request to `path` (`op`, started at `started`, through
    /// `client`) as blz reports it: a timeout or a failure to connect names the endpoint
    /// and the bound that was reached (`ErrorKind::TimedOut`, `ErrorKind::NotConnected`).
    fn error(
        &self,
        op: &'static str,
        path: &Path,
        client: Client,
        started: std::time::Instant,
        e: object_store::Error,
    ) -> Error {
        let (Some(why), Some((endpoint, t))) = (unreachable(&e), &self.endpoint) else {
            return store_error(op, path, e);
        };
        let took = secs(started.elapsed());
        let (kind, what) = match why {
            Unreachable::ConnectTimeout => (
                ErrorKind::TimedOut,
                format!(
                    "timed out: no connection within {} (BLZ_S3_CONNECT_TIMEOUT)",
                    secs(t.connect)
                ),
            ),
            Unreachable::Timeout if client == Client::Read && started.elapsed() < t.request => (
                ErrorKind::TimedOut,
                format!(
                    "timed out: no byte of the answer for {} (BLZ_S3_TIMEOUT)",
                    secs(t.idle)
                ),
            ),
            Unreachable::Timeout if client == Client::Read => (
                ErrorKind::TimedOut,
                format!(
                    "timed out: no byte of the answer for {} (BLZ_S3_TIMEOUT), or an attempt \
                     longer than {} (BLZ_S3_REQUEST_TIMEOUT)",
                    secs(t.idle),
                    secs(t.request)
                ),
            ),
            Unreachable::Timeout => (
                ErrorKind::TimedOut,
                format!(
                    "timed out: an attempt longer than {} (BLZ_S3_REQUEST_TIMEOUT)",
                    secs(t.request)
                ),
            ),
            Unreachable::Connect => (ErrorKind::NotConnected, "could not connect".to_string()),
        };
        Error::io(
            op,
            path,
            std::io::Error::new(
                kind,
                format!(
                    "the S3 endpoint {endpoint} {what}; gave up after {took} ({} retries \
                     at most, none begun later than {}: BLZ_S3_RETRIES, \
                     BLZ_S3_RETRY_TIMEOUT): {e}",
                    t.retries,
                    secs(t.retry_timeout)
                ),
            ),
        )
    }

    /// The bytes of `ranges` of the file `path` stored as the object `key` (each inside the
    /// file; empty ones cost nothing), in the order asked: the ranges, mapped to objects by
    /// [`locate`], are read with as few requests as [`ReadTuning`] allows, all at
    /// once. A missing object was collected after a later commit (the dataset changed under
    /// this reader: [`Error::Changed`]) unless the state object, read again, says otherwise:
    /// when it is gone, the dataset was removed; when it still names the object, the object
    /// is lost for good (both `NotFound`, naming the dataset or the object, so that no retry
    /// loop waits for a change).
    fn read_file_ranges(
        &self,
        pieces: &[Piece],
        ranges: &[std::ops::Range<u64>],
        path: &Path,
    ) -> Result<Vec<Bytes>> {
        blz_format::storage::in_order(ranges.len(), |each| {
            self.read_file_ranges_each(pieces, ranges, path, each)
        })
    }

    /// [`read_file_ranges`](Self::read_file_ranges), each range's bytes handed to `each`
    /// (with its index in `ranges`) as soon as they are in: a range lying in one object
    /// while its request is still streaming the bytes after it, one spread over several
    /// objects once all of them are in. `each` runs on the thread that called, between
    /// the reads of the answers: work it is given should go elsewhere.
    fn read_file_ranges_each(
        &self,
        pieces: &[Piece],
        ranges: &[std::ops::Range<u64>],
        path: &Path,
        each: &(dyn Fn(usize, Bytes) + Sync),
    ) -> Result<()> {
        // Each object's size, as the state gives it, and its pieces to read: (piece
        // number, range in the object).
        let mut by_object: BTreeMap<String, (u64, Vec<Member>)> = BTreeMap::new();
        // Where each piece's bytes go: straight to `each` for a range of one piece, else
        // into the range's list, to be joined.
        let mut goes_to: Vec<(usize, Option<usize>)> = Vec::new();
        let mut split: Vec<(usize, usize)> = Vec::new();
        for (i, r) in ranges.iter().enumerate() {
            let found = if r.start < r.end {
                slice_pieces(pieces, r.clone())
            } else {
                Vec::new()
            };
            let n = found.len();
            if n == 0 {
                each(i, Bytes::new());
            } else if n > 1 {
                split.push((i, n));
            }
            for (k, p) in found.into_iter().enumerate() {
                by_object
                    .entry(p.key.to_string())
                    .or_insert_with(|| (p.size, Vec::new()))
                    .1
                    .push((goes_to.len(), p.at..p.at + p.len));
                goes_to.push((i, (n > 1).then_some(k)));
            }
        }
        if by_object.is_empty() {
            return Ok(());
        }
        let joins: Mutex<HashMap<usize, Vec<Option<Bytes>>>> =
            Mutex::new(split.iter().map(|&(i, n)| (i, vec![None; n])).collect());
        let emit = |piece: usize, b: Bytes| match goes_to[piece] {
            (i, None) => each(i, b),
            (i, Some(k)) => {
                let mut j = joins
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(slot) = j.get_mut(&i).and_then(|v| v.get_mut(k)) {
                    *slot = Some(b);
                }
            }
        };
        let rt = runtime()?;
        let (tuning, slots) = self.read_tuning();
        let got = rt.block_on(futures::future::try_join_all(by_object.iter().map(
            |(obj, (size, list))| {
                self.fetch_object_ranges(obj, *size, list, &tuning, &slots, &emit)
            },
        )));
        match got {
            Ok(_) => {}
            Err(FetchFailure::Short) => return Err(eof(path)),
            Err(FetchFailure::Size { key, got, want }) => {
                return Err(Error::metadata(
                    path,
                    format!(
                        "its object {key:?} is {got} bytes, where the state says {want}: \
                         not the object the state names"
                    ),
                ))
            }
            Err(FetchFailure::Store {
                key: obj,
                error: object_store::Error::NotFound { .. },
                ..
            }) => return Err(self.missing_object(&obj, path)),
            Err(FetchFailure::Store { started, error, .. }) => {
                return Err(self.error("read", path, Client::Read, started, error))
            }
        }
        let joins = joins
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (i, parts) in joins {
            let mut joined = Vec::new();
            for b in parts.iter().flatten() {
                joined.extend_from_slice(b);
            }
            each(i, Bytes::from(joined));
        }
        Ok(())
    }

    /// Reads the ranges `list` of the object `key` (each with its piece number), handing
    /// each to `emit` as soon as its bytes are in: ranges lying close (within
    /// [`ReadTuning::coalesce`]) are read by one span's requests, a span longer than
    /// [`ReadTuning::part_size`] by several at once.
    async fn fetch_object_ranges(
        &self,
        key: &str,
        size: u64,
        list: &[Member],
        tuning: &ReadTuning,
        slots: &tokio::sync::Semaphore,
        emit: &(dyn Fn(usize, Bytes) + Sync),
    ) -> std::result::Result<(), FetchFailure> {
        let mut sorted: Vec<Member> = list.to_vec();
        sorted.sort_by_key(|(_, r)| (r.start, r.end));
        let mut spans: Vec<(std::ops::Range<u64>, Vec<Member>)> = Vec::new();
        for (id, r) in sorted {
            match spans.last_mut() {
                Some((span, members)) if r.start <= span.end.saturating_add(tuning.coalesce) => {
                    span.end = span.end.max(r.end);
                    members.push((id, r));
                }
                _ => spans.push((r.clone(), vec![(id, r)])),
            }
        }
        futures::future::try_join_all(spans.iter().map(|(span, members)| {
            self.fetch_span(key, size, span.clone(), members, tuning, slots, emit)
        }))
        .await
        .map(drop)
    }

    /// The requests of one span ([`ReadTuning::parts`]), all at once. A member range lying
    /// in one part is handed over as that part's answer streams in; one spread over two
    /// parts once both are in.
    #[allow(clippy::too_many_arguments)]
    async fn fetch_span(
        &self,
        key: &str,
        size: u64,
        span: std::ops::Range<u64>,
        members: &[Member],
        tuning: &ReadTuning,
        slots: &tokio::sync::Semaphore,
        emit: &(dyn Fn(usize, Bytes) + Sync),
    ) -> std::result::Result<(), FetchFailure> {
        let parts = tuning.parts(span);
        let mut own: Vec<Vec<Member>> = vec![Vec::new(); parts.len()];
        let mut across = Vec::new();
        for (id, r) in members {
            match parts
                .iter()
                .position(|p| p.start <= r.start && r.end <= p.end)
            {
                Some(j) => own[j].push((*id, r.clone())),
                None => across.push((*id, r.clone())),
            }
        }
        let keep = !across.is_empty();
        let got = futures::future::try_join_all(
            parts
                .iter()
                .zip(&own)
                .map(|(p, o)| self.get_part(key, size, p.clone(), o, slots, emit, keep)),
        )
        .await?;
        let segments: Vec<(u64, Bytes)> = got.into_iter().flatten().collect();
        for (id, r) in across {
            emit(id, cut(&segments, &r));
        }
        Ok(())
    }

    /// One ranged GET (`Range: bytes=a-b`) of the object `key`, once one of `slots` is
    /// free; its answer must hold the whole range, and name the object's size as `size`
    /// (objects are immutable: one of another size is not the object the state names,
    /// whatever its bytes). Each range of `own` goes to `emit` as
    /// soon as the answer has streamed past its end. With `keep`, returns the answer's
    /// bytes as segments (start, bytes), for ranges that also need another part's.
    #[allow(clippy::too_many_arguments)]
    async fn get_part(
        &self,
        key: &str,
        size: u64,
        range: std::ops::Range<u64>,
        own: &[Member],
        slots: &tokio::sync::Semaphore,
        emit: &(dyn Fn(usize, Bytes) + Sync),
        keep: bool,
    ) -> std::result::Result<Vec<(u64, Bytes)>, FetchFailure> {
        // The slots are never closed: a failure to acquire one only lets the request go.
        let _slot = slots.acquire().await.ok();
        let loc = self.key(key);
        self.note(
            "GET",
            key,
            format_args!("bytes={}-{}", range.start, range.end.saturating_sub(1)),
        );
        let started = std::time::Instant::now();
        let failed = |error| FetchFailure::Store {
            key: key.to_string(),
            started,
            error,
        };
        let want = usize::try_from(range.end - range.start).map_err(|_| FetchFailure::Short)?;
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..GetOptions::default()
        };
        let answer = self.store.get_opts(&loc, opts).await.map_err(failed)?;
        if answer.meta.size != size {
            return Err(FetchFailure::Size {
                key: key.to_string(),
                got: answer.meta.size,
                want: size,
            });
        }
        let mut stream = answer.into_stream();
        let mut own = own.to_vec();
        own.sort_by_key(|(_, r)| r.end);
        let mut next = 0;
        // The answer so far: `segments` (handed-out pieces, in order), then `buf` from `at`.
        let mut segments: Vec<(u64, Bytes)> = Vec::new();
        // Room for what the range promises, up to 64 MiB (more grows as bytes come).
        let mut buf = bytes::BytesMut::with_capacity(want.min(64 << 20));
        let mut at = range.start;
        let mut got = 0usize;
        while let Some(frame) = stream.next().await {
            let frame = frame.map_err(failed)?;
            got += frame.len();
            if got > want {
                return Err(FetchFailure::Short);
            }
            buf.extend_from_slice(&frame);
            let end = range.start + got as u64;
            while let Some((id, r)) = own.get(next).filter(|(_, r)| r.end <= end) {
                if r.end > at {
                    let n = (r.end - at) as usize;
                    segments.push((at, buf.split_to(n).freeze()));
                    at = r.end;
                }
                emit(*id, cut(&segments, r));
                next += 1;
            }
        }
        if got != want {
            return Err(FetchFailure::Short);
        }
        if !keep {
            return Ok(Vec::new());
        }
        if !buf.is_empty() {
            segments.push((at, buf.freeze()));
        }
        Ok(segments)
    }

    /// The read settings in force and their slots.
    fn read_tuning(&self) -> (ReadTuning, Arc<tokio::sync::Semaphore>) {
        let r = self
            .reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (r.0, Arc::clone(&r.1))
    }

    /// The file bytes `range` of the file `path` held by `pieces`, read as
    /// [`Backend::read_file_ranges`] reads them (one ranged GET per object piece the range
    /// covers, split into parts past the part size).
    fn read_pieces(
        &self,
        pieces: &[Piece],
        range: std::ops::Range<u64>,
        path: &Path,
    ) -> Result<Bytes> {
        let want = range.end - range.start;
        let got = self
            .read_file_ranges(pieces, std::slice::from_ref(&range), path)?
            .pop()
            .unwrap_or_default();
        if got.len() as u64 != want {
            return Err(eof(path));
        }
        Ok(got)
    }

    /// The block index of the file `path` whose front is `front`: the one the front carries,
    /// or the one in its `blocks_object`, read (one GET) on the first use and kept; `None`
    /// when it has neither.
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] naming the state (an index the front carries) or the
    /// object (one read from it) when it does not decode; the read's error when the object
    /// cannot be read (not kept: the next use reads again).
    fn front_index(&self, front: &FrontCopy, path: &Path) -> Result<Option<Arc<BlockIndex>>> {
        let bad = |at: PathBuf, why: &str| {
            Error::metadata(at, format!("block index of {}: {why}", path.display()))
        };
        let Some(o) = &front.front.blocks_object else {
            return front
                .block_index()
                .map(Option::<&Arc<BlockIndex>>::cloned)
                .map_err(|why| bad(self.root.join(STATE_KEY), &why));
        };
        let at = self.root.join(&o.key);
        if o.size > MAX_FRONT {
            return Err(bad(
                at,
                &format!("an object of {} bytes, over {MAX_FRONT}", o.size),
            ));
        }
        let got = match front.fetched.get() {
            Some(got) => got,
            None => {
                let piece = Piece {
                    key: Arc::from(o.key.as_str()),
                    size: o.size,
                    at: 0,
                    len: o.size,
                };
                let packed = self.read_pieces(&[piece], 0..o.size, &at)?;
                front
                    .fetched
                    .get_or_init(|| decode_packed_index(&packed).map(Arc::new))
            }
        };
        got.as_ref()
            .map(|i| Some(Arc::clone(i)))
            .map_err(|why| bad(at, why))
    }

    /// Why the object `key` of the loaded state (holding the file `path`) is missing, from
    /// the state object as it is now (see [`Backend::read_file_ranges`]).
    fn missing_object(&self, key: &str, path: &Path) -> Error {
        let now = match self.fetch_state() {
            Ok((state, _, _)) => state,
            Err(e) => return e,
        };
        let Some(now) = now else {
            return Error::io(
                "read",
                &self.root,
                std::io::Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "the dataset was removed (its state object {} is gone)",
                        self.root.join(STATE_KEY).display()
                    ),
                ),
            );
        };
        let still_named = now.files.values().any(|f| f.keys().contains(&key));
        if still_named {
            return Error::io(
                "read",
                self.root.join(key),
                std::io::Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "the object holding {} is missing, and the dataset's current state \
                         (generation {}) still names it: the dataset is damaged",
                        path.display(),
                        now.generation
                    ),
                ),
            );
        }
        Error::Changed {
            path: self.root.clone(),
        }
    }

    /// Reads the state object and the manifests it names: the state (every file's entry in
    /// its `files`), its version and when the store stored it (its Last-Modified, seconds
    /// since the Unix epoch by the store's clock), or none when it is absent.
    fn fetch_state(&self) -> Result<(Option<State>, Option<UpdateVersion>, Option<u64>)> {
        self.fetch_state_with(true)
    }

    /// [`Backend::fetch_state`], fetching the manifests only when `manifests` says so
    /// (without them, the state's `files` holds only the state object's own entries: for
    /// a reader of its write ids).
    fn fetch_state_with(
        &self,
        manifests: bool,
    ) -> Result<(Option<State>, Option<UpdateVersion>, Option<u64>)> {
        let rt = runtime()?;
        let loc = self.key(STATE_KEY);
        let path = self.root.join(STATE_KEY);
        let started = std::time::Instant::now();
        self.note("GET", STATE_KEY, format_args!(""));
        let got = rt.block_on(async {
            let r = self.store.get_opts(&loc, GetOptions::default()).await?;
            let version = UpdateVersion {
                e_tag: r.meta.e_tag.clone(),
                version: r.meta.version.clone(),
            };
            let stored = unix_secs(SystemTime::from(r.meta.last_modified));
            if r.meta.size > MAX_STATE {
                return Ok((None, version, stored));
            }
            Ok::<_, object_store::Error>((Some(r.bytes().await?), version, stored))
        });
        let (bytes, version, stored) = match got {
            Ok(x) => x,
            Err(object_store::Error::NotFound { .. }) => return Ok((None, None, None)),
            Err(e) => return Err(self.error("read", &path, Client::Read, started, e)),
        };
        let bytes = bytes.ok_or_else(|| {
            Error::metadata(
                &path,
                format!("the state object is larger than {MAX_STATE} bytes"),
            )
        })?;
        let mut state: State =
            serde_json::from_slice(&bytes).map_err(|e| Error::metadata(&path, e.to_string()))?;
        if state.format != STATE_FORMAT
            || !(STATE_VERSION_WHOLE..=STATE_VERSION).contains(&state.version)
        {
            return Err(Error::metadata(
                &path,
                format!(
                    "format {:?} version {}, where blz reads {STATE_FORMAT:?} versions \
                     {STATE_VERSION_WHOLE} to {STATE_VERSION}",
                    state.format, state.version
                ),
            ));
        }
        if !state.manifests.is_empty() {
            self.check_manifest_list(&state)?;
        }
        check_entries(&path, state.version, &state.files)?;
        if manifests && !state.manifests.is_empty() {
            self.load_manifests(&mut state, |_| true)?;
        }
        Ok((Some(state), Some(version), Some(stored)))
    }

    /// Checks the list of manifests `state` names, before any is fetched: a state version
    /// that holds manifests, at most [`manifest::MAX_MANIFESTS`] of them of at most
    /// [`manifest::MAX_MANIFEST_BYTES`] in all, each a plain key named once, of a size a
    /// state may have and a level a writer reaches.
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] naming the state object.
    fn check_manifest_list(&self, state: &State) -> Result<()> {
        let path = self.root.join(STATE_KEY);
        if state.version < STATE_VERSION {
            return Err(Error::metadata(
                &path,
                format!(
                    "it names manifests, which a state of version {} cannot hold",
                    state.version
                ),
            ));
        }
        let total = state
            .manifests
            .iter()
            .fold(0u64, |t, m| t.saturating_add(m.size));
        if state.manifests.len() > manifest::MAX_MANIFESTS || total > manifest::MAX_MANIFEST_BYTES {
            return Err(Error::metadata(
                &path,
                format!(
                    "it names {} manifests of {total} bytes in all, over the {} manifests and \
                     {} bytes a reader reads",
                    state.manifests.len(),
                    manifest::MAX_MANIFESTS,
                    manifest::MAX_MANIFEST_BYTES
                ),
            ));
        }
        let mut keys = HashSet::new();
        for m in &state.manifests {
            if !plain_key(&m.key)
                || m.size > MAX_STATE
                || m.level > manifest::MAX_LEVEL
                || !keys.insert(m.key.as_str())
            {
                return Err(Error::metadata(
                    &path,
                    format!(
                        "manifest {:?} of {} bytes at level {}: not a plain key inside the \
                         dataset, named twice, larger than {MAX_STATE} bytes or past level {}",
                        m.key,
                        m.size,
                        m.level,
                        manifest::MAX_LEVEL
                    ),
                ));
            }
            let spans_fit = match (&m.dirs, &m.spans) {
                (_, None) => true,
                (Some(d), Some(s)) => d.len() == s.len(),
                (None, Some(_)) => false,
            };
            if !spans_fit {
                return Err(Error::metadata(
                    &path,
                    format!(
                        "manifest {:?} names spans of names without one directory for each",
                        m.key
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Fetches the manifests `state` names (a list [`check_manifest_list`] passed) that are
    /// not loaded yet and that `which` picks, all at once, and puts their entries into its
    /// `files` (each manifest learning its paths).
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] naming a manifest that is missing, is not the size the
    /// state says, does not parse as a manifest, holds a file the state or another manifest
    /// holds, or holds an entry [`check_entries`] refuses; I/O errors from the store.
    ///
    /// [`check_manifest_list`]: Self::check_manifest_list
    fn load_manifests(&self, state: &mut State, which: impl Fn(&Manifest) -> bool) -> Result<()> {
        let rt = runtime()?;
        let (tuning, _) = self.read_tuning();
        let generation = state.generation;
        let wanted = |m: &Manifest| !m.loaded && which(m);
        let got: Vec<Result<Bytes>> = rt.block_on(
            futures::stream::iter(state.manifests.iter().filter(|m| wanted(m)))
                .map(|m| async move {
                    let mpath = self.root.join(&m.key);
                    self.note("GET", &m.key, format_args!("manifest"));
                    let started = std::time::Instant::now();
                    let r = self
                        .store
                        .get_opts(&self.key(&m.key), GetOptions::default())
                        .await;
                    let r = match r {
                        // Refused before its body is read.
                        Ok(r) if r.meta.size != m.size => {
                            return Err(wrong_size(&mpath, r.meta.size, m.size))
                        }
                        Ok(r) => r.bytes().await,
                        Err(e) => Err(e),
                    };
                    r.map_err(|e| match e {
                        object_store::Error::NotFound { .. } => Error::metadata(
                            &mpath,
                            format!(
                                "the manifest object is missing, and the state (generation \
                                 {generation}) names it: the dataset is damaged"
                            ),
                        ),
                        e => self.error("read", &mpath, Client::Read, started, e),
                    })
                })
                .buffered(tuning.concurrency.max(1))
                .collect(),
        );
        let mut manifests = std::mem::take(&mut state.manifests);
        for (m, bytes) in manifests.iter_mut().filter(|m| wanted(m)).zip(got) {
            let mpath = self.root.join(&m.key);
            let bytes = bytes?;
            if bytes.len() as u64 != m.size {
                return Err(wrong_size(&mpath, bytes.len() as u64, m.size));
            }
            let doc: ManifestDoc = serde_json::from_slice(&bytes)
                .map_err(|e| Error::metadata(&mpath, e.to_string()))?;
            if doc.format != manifest::MANIFEST_FORMAT || doc.version != manifest::MANIFEST_VERSION
            {
                return Err(Error::metadata(
                    &mpath,
                    format!(
                        "format {:?} version {}, where blz reads {:?} version {}",
                        doc.format,
                        doc.version,
                        manifest::MANIFEST_FORMAT,
                        manifest::MANIFEST_VERSION
                    ),
                ));
            }
            check_entries(&mpath, state.version, &doc.files)?;
            for (rel, f) in doc.files {
                if matches!(f, StateFile::Inline { .. }) || state.files.contains_key(&rel) {
                    return Err(Error::metadata(
                        &mpath,
                        format!(
                            "file {rel:?} is inline, or held by the state or another \
                             manifest too"
                        ),
                    ));
                }
                if m.dirs.is_some() && !m.may_hold(&rel) {
                    return Err(Error::metadata(
                        &mpath,
                        format!(
                            "file {rel:?} lies outside the directories and names the state \
                             gives for the manifest"
                        ),
                    ));
                }
                m.paths.push(rel.clone());
                state.files.insert(rel, f);
            }
            m.loaded = true;
        }
        state.manifests = manifests;
        Ok(())
    }
}

/// A node showing the committed file `f`.
fn node_of(f: &StateFile) -> Arc<Node> {
    Node::new(match f {
        StateFile::Object { len, front, .. } | StateFile::Extents { len, front, .. } => {
            Data::Remote {
                pieces: pieces_of(f),
                len: *len,
                head: None,
                front: front.clone().map(FrontCopy::new),
            }
        }
        StateFile::Inline { text } => Data::Memory(Bytes::from(text.clone().into_bytes())),
    })
}

/// Checks the file entries `files` of a state of layout `version`, read from the object
/// `path`: every path and key plain, extents only from version 2 on and never overlapping,
/// every front inside its file.
///
/// # Errors
/// [`Error::InvalidMetadata`] naming `path` and the file at fault.
fn check_entries(path: &Path, version: u32, files: &BTreeMap<String, StateFile>) -> Result<()> {
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
fn wrong_size(path: &Path, got: u64, want: u64) -> Error {
    Error::metadata(
        path,
        format!("the manifest object is {got} bytes, where the state says {want}"),
    )
}

/// A range of an object to read, with the number of the file piece it is.
type Member = (usize, std::ops::Range<u64>);

/// The bytes `r` from `segments` (start, bytes) that hold them, in order and adjoining:
/// a slice of one segment when one holds them all, else a copy joined from several.
fn cut(segments: &[(u64, Bytes)], r: &std::ops::Range<u64>) -> Bytes {
    let within = |(s, b): &&(u64, Bytes)| *s <= r.start && r.end <= *s + b.len() as u64;
    if let Some((s, b)) = segments.iter().find(within) {
        return b.slice((r.start - s) as usize..(r.end - s) as usize);
    }
    let mut joined = Vec::with_capacity((r.end - r.start) as usize);
    for (s, b) in segments {
        let (a, e) = (r.start.max(*s), r.end.min(*s + b.len() as u64));
        if a < e {
            joined.extend_from_slice(&b[(a - s) as usize..(e - s) as usize]);
        }
    }
    Bytes::from(joined)
}

/// What a file's bytes are.
enum Data {
    /// A file of the committed state, not written since; its first block once read.
    Remote {
        /// The object pieces holding it, in order.
        pieces: Vec<Piece>,
        len: u64,
        head: Option<Bytes>,
        /// The copy of its first-read bytes the state keeps, if any.
        front: Option<Arc<FrontCopy>>,
    },
    /// Bytes known in memory (an inline meta document).
    Memory(Bytes),
    /// Written since the last commit.
    Spool(Spool),
}

/// A file written since the last commit: the bytes written are in a local (sparse) spool
/// file, the others are still those of the committed file, read from its objects when asked
/// for. Every byte below `len` is in `written` or below the end of `base`.
struct Spool {
    file: std::fs::File,
    len: u64,
    /// The committed file's pieces, cut where the file was shrunk.
    base: Vec<Piece>,
    /// The byte ranges written (grown bytes count as written: zeros), sorted and apart.
    written: Vec<std::ops::Range<u64>>,
    /// The committed file's front copy: it answers reads of bytes not written.
    front: Option<Arc<FrontCopy>>,
    /// Counts the writes and length changes: an early upload is current while it holds
    /// the count it was read at.
    version: u64,
    /// The file as it went up before the commit ([`ObjectFile::sync`]), if it did.
    early: Option<Early>,
    /// Whether bytes of `file` were handed out mapped ([`Spool::bytes_of`]: an upload may
    /// still be reading them). A mapped spool file is never written again: the next write
    /// moves the bytes to a fresh spool file first ([`Spool::file_to_write`]).
    mapped: bool,
}

/// A spooled file uploaded before its commit, whole, under `key`, as it was at `version`
/// ([`Spool::version`]). The upload itself is the draft's ([`Committed::draft_tasks`]).
struct Early {
    key: String,
    version: u64,
    /// The block index of the bytes that went up, worked out beside the upload.
    index: Option<tokio::task::JoinHandle<Option<BlockIndex>>>,
}

/// Spool files made by this process (for tests: a file written many times has one).
static SPOOL_FILES: AtomicU64 = AtomicU64::new(0);

impl Spool {
    fn new(path: &Path) -> Result<Spool> {
        let file =
            tempfile::tempfile().map_err(|e| Error::io("create a spool file for", path, e))?;
        SPOOL_FILES.fetch_add(1, Ordering::Relaxed);
        Ok(Spool {
            file,
            len: 0,
            base: Vec::new(),
            written: Vec::new(),
            front: None,
            version: 0,
            early: None,
            mapped: false,
        })
    }

    /// The spool file, to write: a fresh copy of it if its bytes were handed out mapped
    /// (the mapping keeps the old one, unchanged, as long as it lives).
    fn file_to_write(&mut self, path: &Path) -> Result<&std::fs::File> {
        if self.mapped {
            use std::io::{Seek, SeekFrom};
            let err = |e| Error::io("copy a spool file for", path, e);
            let mut fresh = tempfile::tempfile().map_err(err)?;
            let mut old = &self.file;
            old.seek(SeekFrom::Start(0)).map_err(err)?;
            std::io::copy(&mut std::io::Read::take(old, self.len), &mut fresh).map_err(err)?;
            fresh.set_len(self.len).map_err(err)?;
            SPOOL_FILES.fetch_add(1, Ordering::Relaxed);
            self.file = fresh;
            self.mapped = false;
        }
        Ok(&self.file)
    }

    /// Reads the file bytes from `offset` into `buf`: written ones from the spool file, the
    /// others from the front copy or the committed file's objects.
    fn read_at(&self, backend: &Backend, offset: u64, buf: &mut [u8], path: &Path) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.len)
            .ok_or_else(|| eof(path))?;
        let mut pos = offset;
        while pos < end {
            let next = self.written.iter().find(|r| r.end > pos);
            let (written, seg_end) = match next {
                Some(r) if r.start <= pos => (true, r.end.min(end)),
                Some(r) => (false, r.start.min(end)),
                None => (false, end),
            };
            let dst = &mut buf[(pos - offset) as usize..(seg_end - offset) as usize];
            if written {
                self.file
                    .read_exact_at(dst, pos)
                    .map_err(|e| Error::io("read", path, e))?;
            } else if let Some(at) = self.front.as_ref().and_then(|f| f.find(pos, seg_end)) {
                let b = front_bytes(backend, self.front.as_deref(), path)?;
                dst.copy_from_slice(&b[at..at + dst.len()]);
            } else {
                let got = backend.read_pieces(&self.base, pos..seg_end, path)?;
                dst.copy_from_slice(&got);
            }
            pos = seg_end;
        }
        Ok(())
    }

    /// Brings the file bytes `ranges` into the spool file (those not written are read from
    /// the front copy or the objects, 8 MiB at a time), so that reading them needs no
    /// request: an upload reads them inside the runtime, where no request can block.
    fn localize(
        &mut self,
        backend: &Backend,
        ranges: &[std::ops::Range<u64>],
        path: &Path,
    ) -> Result<()> {
        const STEP: u64 = 8 << 20;
        for r in ranges {
            let mut pos = r.start;
            while pos < r.end {
                let next = self.written.iter().find(|w| w.end > pos).cloned();
                let gap_end = match next {
                    Some(w) if w.start <= pos => {
                        pos = w.end.min(r.end);
                        continue;
                    }
                    Some(w) => w.start.min(r.end),
                    None => r.end,
                };
                let end = gap_end.min(pos + STEP);
                let mut buf = vec![0u8; (end - pos) as usize];
                self.read_at(backend, pos, &mut buf, path)?;
                self.file_to_write(path)?
                    .write_all_at(&buf, pos)
                    .map_err(|e| Error::io("write a spool file for", path, e))?;
                add_range(&mut self.written, pos..end);
                pos = end;
            }
        }
        Ok(())
    }

    /// The file bytes `ranges`, concatenated. One range written whole (a new file, or the
    /// bytes appended to one) is mapped from the spool file, not copied: an upload sends it
    /// from the page cache. The spool file is then never written in place again.
    fn bytes_of(
        &mut self,
        backend: &Backend,
        ranges: &[std::ops::Range<u64>],
        path: &Path,
    ) -> Result<Bytes> {
        if let [r] = ranges {
            let written = self
                .written
                .iter()
                .any(|w| w.start <= r.start && r.end <= w.end);
            // The mapping never reaches past the spool file's end (a read there would fault).
            let held = self.file.metadata().is_ok_and(|m| m.len() >= r.end);
            if written && held && r.start < r.end && r.end <= self.len {
                let len = usize::try_from(r.end).map_err(|_| eof(path))?;
                // SAFETY: the spool file is this process's own unnamed temporary file, and
                // `mapped` keeps every later write away from it (`file_to_write`), so the
                // mapped bytes never change and the file never shrinks under the mapping.
                let map = unsafe { memmap2::MmapOptions::new().len(len).map(&self.file) }
                    .map_err(|e| Error::io("map a spool file for", path, e))?;
                self.mapped = true;
                return Ok(Bytes::from_owner(map).slice(r.start as usize..));
            }
        }
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        let total = usize::try_from(total).map_err(|_| {
            Error::io(
                "read",
                path,
                std::io::Error::other("larger than memory can hold"),
            )
        })?;
        let mut buf = vec![0u8; total];
        let mut at = 0usize;
        for r in ranges {
            let n = (r.end - r.start) as usize;
            self.read_at(backend, r.start, &mut buf[at..at + n], path)?;
            at += n;
        }
        Ok(Bytes::from(buf))
    }
}

/// The decoded bytes of a front copy, or the error naming the state object and the file.
fn front_bytes<'f>(
    backend: &Backend,
    front: Option<&'f FrontCopy>,
    path: &Path,
) -> Result<&'f Bytes> {
    let f = front.ok_or_else(|| eof(path))?;
    f.bytes().map_err(|why| {
        Error::metadata(
            backend.root.join(STATE_KEY),
            format!("file {}: {why}", path.display()),
        )
    })
}

struct Node {
    data: Mutex<Data>,
    /// Held while the first block is fetched, so that readers racing for it (parallel
    /// chunk reads right after open) make one request, not one each.
    head_fetch: Mutex<()>,
}

/// The room for upload bytes in memory ([`UPLOAD_BUDGET_MIB`] permits of 1 MiB).
fn upload_budget() -> &'static Arc<tokio::sync::Semaphore> {
    // One per process: a forked child never gets back the permits its parent's uploads held.
    static BUDGET: blz_format::process::PerProcess<Arc<tokio::sync::Semaphore>> =
        blz_format::process::PerProcess::new();
    BUDGET.get_or_init(|| Arc::new(tokio::sync::Semaphore::new(UPLOAD_BUDGET_MIB as usize)))
}

/// The permits of [`upload_budget`] an upload of `len` bytes takes.
fn budget_of(len: u64) -> u32 {
    len.div_ceil(1 << 20).clamp(1, u64::from(UPLOAD_BUDGET_MIB)) as u32
}

/// Waits for the uploads `tasks` (of the dataset at `root`), all at once; the first
/// failure is the error.
fn join_uploads(root: &Path, tasks: Vec<tokio::task::JoinHandle<Result<()>>>) -> Result<()> {
    if tasks.is_empty() {
        return Ok(());
    }
    runtime()?
        .block_on(futures::future::join_all(tasks))
        .into_iter()
        .try_for_each(|r| {
            r.unwrap_or_else(|e| Err(Error::io("upload", root, std::io::Error::other(e))))
        })
}

/// Settles a create's [`Probe`] (waiting for its GET when `wait`, else only if the GET is
/// done): an error when the dataset turned out to be there (or its state could not be
/// read); `Ok` when it is absent, as assumed, or not known yet and `!wait`.
fn settle_probe(c: &Mutex<Committed>, root: &Path, wait: bool) -> Result<()> {
    let exists = || {
        Error::InvalidArgument(format!(
            "{} already exists (use overwrite to replace it)",
            root.display()
        ))
    };
    let failed = |why: &str| {
        Error::io(
            "read",
            root.join(STATE_KEY),
            std::io::Error::other(format!("whether the dataset exists is unknown: {why}")),
        )
    };
    let pending = {
        let mut g = lock_committed(c);
        match &g.probe {
            Some(Probe::Exists) => return Err(exists()),
            Some(Probe::Failed(why)) => return Err(failed(why)),
            Some(Probe::Pending(h)) if wait || h.is_finished() => {}
            // Settled absent, or not known yet and not to be waited for.
            _ => return Ok(()),
        }
        let Some(Probe::Pending(h)) = g.probe.take() else {
            return Ok(());
        };
        h
    };
    let got = pending
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let (settled, result) = match got {
        Ok(false) => (None, Ok(())),
        Ok(true) => (Some(Probe::Exists), Err(exists())),
        Err(e) => {
            let why = e.to_string();
            (Some(Probe::Failed(why.clone())), Err(failed(&why)))
        }
    };
    lock_committed(c).probe = settled;
    result
}

fn lock_committed(c: &Mutex<Committed>) -> MutexGuard<'_, Committed> {
    c.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock_data(node: &Node) -> MutexGuard<'_, Data> {
    node.data
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Node {
    fn new(data: Data) -> Arc<Node> {
        Arc::new(Node {
            data: Mutex::new(data),
            head_fetch: Mutex::new(()),
        })
    }

    fn spool(path: &Path) -> Result<Arc<Node>> {
        Ok(Node::new(Data::Spool(Spool::new(path)?)))
    }
}

/// The bytes of a spooled (or in-memory) file to upload: `ranges` of it, concatenated, or
/// the whole file.
fn node_bytes(
    backend: &Backend,
    node: &Node,
    path: &Path,
    ranges: Option<&[std::ops::Range<u64>]>,
) -> Result<Bytes> {
    match &mut *lock_data(node) {
        Data::Spool(sp) => match ranges {
            Some(r) => sp.bytes_of(backend, r, path),
            None => sp.bytes_of(backend, std::slice::from_ref(&(0..sp.len)), path),
        },
        Data::Memory(b) => Ok(b.clone()),
        Data::Remote { .. } => Err(Error::io(
            "upload",
            path,
            std::io::Error::other("the file is not spooled"),
        )),
    }
}

/// Turns a file's data into a spool for writing. The committed bytes stay where they are:
/// only what is later read of them is fetched.
fn materialize(data: &mut Data, path: &Path) -> Result<()> {
    if let Data::Spool(_) = data {
        return Ok(());
    }
    let mut sp = Spool::new(path)?;
    match data {
        Data::Spool(_) => {}
        Data::Memory(b) => {
            sp.file
                .write_all_at(b, 0)
                .map_err(|e| Error::io("write a spool file for", path, e))?;
            sp.len = b.len() as u64;
            add_range(&mut sp.written, 0..sp.len);
        }
        Data::Remote {
            pieces, len, front, ..
        } => {
            sp.file
                .set_len(*len)
                .map_err(|e| Error::io("write a spool file for", path, e))?;
            sp.len = *len;
            sp.base = pieces.clone();
            sp.front = front.clone();
        }
    }
    *data = Data::Spool(sp);
    Ok(())
}

struct ObjectFile {
    node: Arc<Node>,
    backend: Arc<Backend>,
    path: PathBuf,
    writable: bool,
    /// The committed state of the handle that opened it: the generation and tag its early
    /// upload is named by.
    committed: Arc<Mutex<Committed>>,
}

/// The length of `r` as a buffer size: [`eof`] for a range no file of this process holds.
fn range_len(r: &std::ops::Range<u64>, path: &Path) -> Result<usize> {
    r.end
        .checked_sub(r.start)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| eof(path))
}

fn eof(path: &Path) -> Error {
    Error::io(
        "read",
        path,
        std::io::Error::new(ErrorKind::UnexpectedEof, "read past the end of the file"),
    )
}

impl ObjectFile {
    /// Starts uploading the file now, whole, under the name its commit would give it
    /// (`<file path>.<generation>-<tag>`, the tag drawn for this handle's next commit), if
    /// it is new since the last commit, longer than an inline document, and not uploaded
    /// early already. The commit names the object if the file was not written again since
    /// (else it uploads the file as usual, after this upload ended); it waits for the
    /// upload, and fails with its error. Holds at most [`UPLOAD_BUDGET_MIB`] of this
    /// process's upload bytes in memory: waits here for room.
    fn upload_early(&self) -> Result<()> {
        let Some(rel) = self.early_rel() else {
            return Ok(());
        };
        // Called inside the runtime (no caller does), it could not wait for room: the
        // commit uploads the file instead.
        if tokio::runtime::Handle::try_current().is_ok() {
            return Ok(());
        }
        // A create that found the dataset there uploads nothing more (the sync's error is
        // the create's).
        settle_probe(&self.committed, &self.backend.root, false)?;
        // An earlier early upload that failed fails this sync: the writer stops at its next
        // file instead of encoding the rest for a commit that cannot succeed.
        self.early_failure()?;
        let eligible =
            |sp: &Spool| sp.base.is_empty() && sp.len > INLINE_MAX as u64 && sp.early.is_none();
        let (version, len) = match &*lock_data(&self.node) {
            Data::Spool(sp) if eligible(sp) => (sp.version, sp.len),
            _ => return Ok(()),
        };
        let rt = runtime()?;
        let permit = rt
            .block_on(Arc::clone(upload_budget()).acquire_many_owned(budget_of(len)))
            .map_err(|e| Error::io("upload", &self.path, std::io::Error::other(e)))?;
        // The node's lock and the draft's are never held together (a commit takes the
        // draft's, then nodes').
        let key = {
            let mut c = lock_committed(&self.committed);
            let tag = *c.draft_tag.get_or_insert_with(rand::random);
            let generation = c.state.as_ref().map_or(1, |s| s.generation + 1);
            let key = format!("{rel}.{generation}-{tag:016x}");
            if !c.draft_keys.insert(key.clone()) {
                // Another file went up early under this name (it was written here, then
                // renamed): this one goes up with the commit, under a tag of its own.
                return Ok(());
            }
            key
        };
        let bytes = match &mut *lock_data(&self.node) {
            Data::Spool(sp) if sp.version == version && eligible(sp) => sp.bytes_of(
                &self.backend,
                std::slice::from_ref(&(0..sp.len)),
                &self.path,
            )?,
            // Written meanwhile: the commit uploads it (under the key just claimed).
            _ => return Ok(()),
        };
        let (backend, path, k) = (Arc::clone(&self.backend), self.path.clone(), key.clone());
        // The commit names the object with the file's block index: worked out now, beside
        // the upload, rather than on the commit's path.
        let index = {
            let (bytes, path) = (bytes.clone(), path.clone());
            rt.spawn_blocking(move || blz_format::blpk::block_index_of_bytes(&bytes, &path))
        };
        let task = rt.spawn(async move {
            let _room = permit;
            backend.upload(&k, &path, bytes).await
        });
        lock_committed(&self.committed).draft_tasks.push(task);
        // The bytes that went up are the file's at `version`: the commit names the object
        // while the file is still so (else it uploads the file after this upload ended).
        if let Data::Spool(sp) = &mut *lock_data(&self.node) {
            sp.early = Some(Early {
                key,
                version,
                index: Some(index),
            });
        }
        Ok(())
    }

    /// The first error of this commit's early uploads that have ended (those still running
    /// are left to run; those that succeeded need no more waiting).
    fn early_failure(&self) -> Result<()> {
        let done: Vec<tokio::task::JoinHandle<Result<()>>> = {
            let mut c = lock_committed(&self.committed);
            let (done, running) = std::mem::take(&mut c.draft_tasks)
                .into_iter()
                .partition(tokio::task::JoinHandle::is_finished);
            c.draft_tasks = running;
            done
        };
        if done.is_empty() {
            return Ok(());
        }
        let r = join_uploads(&self.backend.root, done);
        if let Err(e) = &r {
            lock_committed(&self.committed).draft_failed = Some(e.to_string());
        }
        r
    }

    /// The file's path relative to the dataset root: below the root, or below the staging
    /// directory a create builds in (`<root>.tmp-build`, renamed to the root before its
    /// commit); `None` for a file elsewhere.
    fn early_rel(&self) -> Option<String> {
        let root = &self.backend.root;
        let staging =
            root.with_file_name(format!("{}{STAGING_SUFFIX}", root.file_name()?.to_str()?));
        let rel = self
            .path
            .strip_prefix(root)
            .or_else(|_| self.path.strip_prefix(&staging))
            .ok()?
            .to_str()?;
        (!rel.is_empty()).then(|| rel.to_string())
    }

    fn check_writable(&self) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::io(
                "write",
                &self.path,
                std::io::Error::new(ErrorKind::PermissionDenied, "the file is open to read"),
            ))
        }
    }
}

impl StorageFile for ObjectFile {
    fn len(&self) -> Result<u64> {
        match &*lock_data(&self.node) {
            Data::Remote { len, .. } => Ok(*len),
            Data::Memory(b) => Ok(b.len() as u64),
            Data::Spool(sp) => Ok(sp.len),
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or_else(|| eof(&self.path))?;
        let (pieces, len, has_front) = {
            let data = lock_data(&self.node);
            match &*data {
                Data::Spool(sp) => return sp.read_at(&self.backend, offset, buf, &self.path),
                Data::Memory(b) => {
                    let src = b
                        .get(offset as usize..end as usize)
                        .filter(|_| end <= b.len() as u64)
                        .ok_or_else(|| eof(&self.path))?;
                    buf.copy_from_slice(src);
                    return Ok(());
                }
                Data::Remote {
                    pieces,
                    len,
                    head,
                    front,
                } => {
                    if end > *len {
                        return Err(eof(&self.path));
                    }
                    if let Some(h) = head.as_ref().filter(|h| end <= h.len() as u64) {
                        buf.copy_from_slice(&h[offset as usize..end as usize]);
                        return Ok(());
                    }
                    if let Some(at) = front.as_ref().and_then(|f| f.find(offset, end)) {
                        let b = front_bytes(&self.backend, front.as_deref(), &self.path)?;
                        buf.copy_from_slice(&b[at..at + buf.len()]);
                        return Ok(());
                    }
                    (pieces.clone(), *len, front.is_some())
                }
            }
        };
        if buf.is_empty() {
            return Ok(());
        }
        // With its front matter known, a file is read exactly where asked: no first block.
        let head_len = if has_front { 0 } else { HEAD_BLOCK.min(len) };
        if end <= head_len {
            let _fetching = self
                .node
                .head_fetch
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Data::Remote { head: Some(h), .. } = &*lock_data(&self.node) {
                if end <= h.len() as u64 {
                    buf.copy_from_slice(&h[offset as usize..end as usize]);
                    return Ok(());
                }
            }
            let head = self.backend.read_pieces(&pieces, 0..head_len, &self.path)?;
            buf.copy_from_slice(&head[offset as usize..end as usize]);
            if let Data::Remote { head: h, .. } = &mut *lock_data(&self.node) {
                *h = Some(head);
            }
            return Ok(());
        }
        let got = self.backend.read_pieces(&pieces, offset..end, &self.path)?;
        buf.copy_from_slice(&got);
        Ok(())
    }

    fn read_ranges(&self, ranges: &[std::ops::Range<u64>]) -> Result<Vec<Bytes>> {
        blz_format::storage::in_order(ranges.len(), |each| self.read_ranges_each(ranges, each))
    }

    fn read_ranges_each(
        &self,
        ranges: &[std::ops::Range<u64>],
        each: &(dyn Fn(usize, Bytes) + Sync),
    ) -> Result<()> {
        // The ranges left for the store: (index in `ranges`, range).
        let mut remote = Vec::new();
        // The ranges inside a front-less file's first block, not yet fetched.
        let mut in_head = Vec::new();
        let pieces = {
            let data = lock_data(&self.node);
            let Data::Remote {
                pieces,
                len,
                head,
                front,
            } = &*data
            else {
                drop(data);
                for (i, r) in ranges.iter().enumerate() {
                    let mut b = vec![0u8; range_len(r, &self.path)?];
                    self.read_at(r.start, &mut b)?;
                    each(i, Bytes::from(b));
                }
                return Ok(());
            };
            let head_len = if front.is_some() {
                0
            } else {
                HEAD_BLOCK.min(*len)
            };
            let mut here = Vec::new();
            for (i, r) in ranges.iter().enumerate() {
                if r.start > r.end || r.end > *len {
                    return Err(eof(&self.path));
                }
                if r.start == r.end {
                    here.push((i, Bytes::new()));
                } else if let Some(h) = head.as_ref().filter(|h| r.end <= h.len() as u64) {
                    here.push((i, h.slice(r.start as usize..r.end as usize)));
                } else if let Some(at) = front.as_ref().and_then(|f| f.find(r.start, r.end)) {
                    let b = front_bytes(&self.backend, front.as_deref(), &self.path)?;
                    here.push((i, b.slice(at..at + (r.end - r.start) as usize)));
                } else if r.end > head_len {
                    remote.push((i, r.clone()));
                } else {
                    in_head.push(i);
                }
            }
            let pieces = pieces.clone();
            drop(data);
            for (i, b) in here {
                each(i, b);
            }
            pieces
        };
        // What a front-less file's first block holds is read through it (one request, kept).
        for i in in_head {
            let r = &ranges[i];
            let mut b = vec![0u8; range_len(r, &self.path)?];
            self.read_at(r.start, &mut b)?;
            each(i, Bytes::from(b));
        }
        let asked: Vec<std::ops::Range<u64>> = remote.iter().map(|(_, r)| r.clone()).collect();
        self.backend
            .read_file_ranges_each(&pieces, &asked, &self.path, &|j, b| each(remote[j].0, b))
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_writable()?;
        let mut d = lock_data(&self.node);
        materialize(&mut d, &self.path)?;
        if let Data::Spool(sp) = &mut *d {
            let end = offset
                .checked_add(data.len() as u64)
                .ok_or_else(|| eof(&self.path))?;
            sp.version += 1;
            sp.file_to_write(&self.path)?
                .write_all_at(data, offset)
                .map_err(|e| Error::io("write", &self.path, e))?;
            if !data.is_empty() {
                // A gap left past the old end reads as zeros: written too.
                add_range(&mut sp.written, sp.len.min(offset)..end);
                sp.len = sp.len.max(end);
            }
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable()?;
        let mut d = lock_data(&self.node);
        materialize(&mut d, &self.path)?;
        if let Data::Spool(sp) = &mut *d {
            sp.version += 1;
            sp.file_to_write(&self.path)?
                .set_len(len)
                .map_err(|e| Error::io("truncate", &self.path, e))?;
            if len < sp.len {
                clip_ranges(&mut sp.written, len);
                sp.base = slice_pieces(&sp.base, 0..len);
            } else {
                add_range(&mut sp.written, sp.len..len);
            }
            sp.len = len;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        // Durability comes from the commit; a spool file dies with the process. A file
        // written whole since the last commit goes up now, though (its commit names the
        // object): the engine syncs a superchunk file once it is full, so the upload runs
        // while the next files are encoded.
        if self.writable {
            self.upload_early()?;
        }
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn small_reads_are_cheap(&self) -> bool {
        false
    }

    fn chunk_blocks(&self, offset: u64) -> Result<Option<Arc<blz_format::blpk::ChunkBlocks>>> {
        // The committed file's index; for a file written since, its entries for chunks
        // none of whose bytes were written (or cut off).
        let (front, written, len) = match &*lock_data(&self.node) {
            Data::Remote { front: Some(f), .. } => (Arc::clone(f), None, u64::MAX),
            Data::Spool(Spool {
                front: Some(f),
                written,
                len,
                ..
            }) => (Arc::clone(f), Some(written.clone()), *len),
            _ => return Ok(None),
        };
        let index = self.backend.front_index(&front, &self.path)?;
        let Some(cb) = index.as_ref().and_then(|i| i.get(&offset)) else {
            return Ok(None);
        };
        let end = offset.saturating_add(cb.cbytes() as u64);
        let untouched = end <= len
            && written
                .iter()
                .flatten()
                .all(|w| w.end <= offset || end <= w.start);
        Ok(untouched.then(|| Arc::clone(cb)))
    }
}

/// The files and directories as this handle sees them (committed state plus overlay).
#[derive(Default)]
struct Tree {
    /// Files by key relative to the bucket (`prefix/name.blz/meta/sizes`).
    files: BTreeMap<String, Arc<Node>>,
    /// Directories made explicitly (others exist because files lie below them).
    dirs: BTreeSet<String>,
}

impl Tree {
    fn is_dir(&self, key: &str) -> bool {
        if key.is_empty() || self.dirs.contains(key) {
            return true;
        }
        let p = format!("{key}/");
        self.files
            .range(p.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&p))
            || self
                .dirs
                .range(p.clone()..)
                .next()
                .is_some_and(|k| k.starts_with(&p))
    }
}

#[derive(Default)]
struct Committed {
    /// The state; its manifests not [`loaded`](manifest::Manifest::loaded) yet are read
    /// when first needed ([`ObjectStorage::load_pending`]): an open reads the state object
    /// alone.
    state: Option<State>,
    version: Option<UpdateVersion>,
    /// The tag of the commit this handle prepares, drawn by the first file that went up
    /// before it ([`ObjectFile::sync`]): the commit names all its uploads with it.
    draft_tag: Option<u64>,
    /// The keys the early uploads of that commit claimed: one upload a key, so no two
    /// files' bytes ever race for one object.
    draft_keys: HashSet<String>,
    /// Those uploads, each until the commit waits for it ([`ObjectStorage::finish_early`]).
    draft_tasks: Vec<tokio::task::JoinHandle<Result<()>>>,
    /// The error of one of them found ended before the commit ([`ObjectFile::sync`]): the
    /// commit fails with it (its file's entry would name an object that is not there).
    draft_failed: Option<String>,
    /// This handle's last commit took effect, but its answer was lost and another writer's
    /// commit replaced it before it was read back: `version` is unknown, and the next
    /// commit of this handle is refused ([`Error::Conflict`]) without a request.
    superseded: bool,
    /// When the store stored `state` (its Last-Modified, by the store's clock), when this
    /// handle read it.
    stored_at: Option<u64>,
    /// For a handle made to create a dataset ([`ObjectStorage::open_url_to_create`]): the
    /// read of the state that tells whether the dataset is there after all, until the
    /// commit (or an early upload finding it done) has settled it.
    probe: Option<Probe>,
}

/// What a create's handle knows of a dataset it assumed absent ([`Committed::probe`]).
enum Probe {
    /// The state's GET, still on its way: whether the state is there.
    Pending(std::thread::JoinHandle<Result<bool>>),
    /// The state is there: the create must not commit.
    Exists,
    /// The state could not be read: why.
    Failed(String),
}

/// What a conditional write of the state did.
enum Written {
    /// It took effect and the state object is it, at this version.
    Current(UpdateVersion),
    /// It took effect (its answer was lost), and another writer's commit has replaced it.
    Superseded,
}

impl Committed {
    /// The committed state after `state` was written.
    fn written(state: State, w: Written) -> Committed {
        match w {
            Written::Current(v) => Committed {
                state: Some(state),
                version: Some(v),
                ..Committed::default()
            },
            Written::Superseded => Committed {
                state: Some(state),
                superseded: true,
                ..Committed::default()
            },
        }
    }
}

/// What a commit uploads of one file: under `key`, the bytes `ranges` of it concatenated,
/// or the whole file.
struct Upload {
    rel: String,
    key: String,
    node: Arc<Node>,
    ranges: Option<Vec<std::ops::Range<u64>>>,
}

/// A dataset on an object store (see the module documentation).
pub struct ObjectStorage {
    backend: Arc<Backend>,
    /// The bucket as callers name it: paths are `<base>/<key>`.
    base: PathBuf,
    tree: Mutex<Tree>,
    /// Shared with the files it opened, which name their early uploads by it.
    committed: Arc<Mutex<Committed>>,
}

impl std::fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStorage")
            .field("root", &self.backend.root)
            .finish_non_exhaustive()
    }
}

/// Locks held in this process, by lock path.
fn held_locks() -> MutexGuard<'static, HashSet<PathBuf>> {
    // One per process: a forked child holds none of its parent's locks.
    static HELD: blz_format::process::PerProcess<Mutex<HashSet<PathBuf>>> =
        blz_format::process::PerProcess::new();
    HELD.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct HeldLock(PathBuf);

impl Drop for HeldLock {
    fn drop(&mut self) {
        held_locks().remove(&self.0);
    }
}

/// Splits `s3://BUCKET/KEY` into the bucket and the key. The key is `/`-separated plain
/// names (`spec/object-store.md` §1): none empty, `.` or `..`, and no slash at either end,
/// so `s3://b//x.blz` and `s3://b/x.blz/` are refused rather than taken for `s3://b/x.blz`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the URL and what is wrong with it.
pub fn parse_s3_url(url: &str) -> Result<(String, String)> {
    let bad = |what: &str| {
        Error::InvalidArgument(format!(
            "{url}: {what}; an object-store dataset is named s3://BUCKET/KEY, the key plain \
             names joined by single slashes"
        ))
    };
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| Error::InvalidArgument(format!("{url} is not an s3:// URL")))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad("no bucket name"));
    }
    if key.is_empty() {
        return Err(bad("no key after the bucket"));
    }
    if key.starts_with('/') || key.contains("//") {
        return Err(bad("an empty path component (two slashes in a row)"));
    }
    if key.ends_with('/') {
        return Err(bad("a trailing slash"));
    }
    if key.split('/').any(|c| c == "." || c == "..") {
        return Err(bad("a `.` or `..` path component"));
    }
    Ok((bucket.to_string(), key.to_string()))
}

/// The longest pause between two attempts of a request (the backoff starts at 100 ms and
/// grows at random up to this).
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How long the S3 client waits for an endpoint, and how often it tries again
/// (`spec/object-store.md` §1). Each field is set by a `BLZ_S3_*` variable (seconds, a
/// decimal number) or else by `object_store`'s `AWS_*` one where it has one (seconds, or a
/// number with a unit `ms`, `s`, `m`, `h`), and else takes its [`S3Timeouts::DEFAULT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct S3Timeouts {
    /// Longest wait for a connection to the endpoint (`BLZ_S3_CONNECT_TIMEOUT`, else
    /// `AWS_CONNECT_TIMEOUT`; 10 s).
    pub connect: Duration,
    /// Longest a read waits without receiving a byte: for the first byte of the answer, then
    /// between bytes of its body (`BLZ_S3_TIMEOUT`, else `AWS_READ_TIMEOUT`; 30 s). Uploads
    /// and commits have no such bound (the HTTP client counts a request body's sending as
    /// waiting for the answer): [`S3Timeouts::request`] bounds them.
    pub idle: Duration,
    /// Longest one attempt of any request takes, from connecting to its last byte
    /// (`BLZ_S3_REQUEST_TIMEOUT`, else `AWS_TIMEOUT`; 300 s).
    pub request: Duration,
    /// Most times a failed request is tried again (`BLZ_S3_RETRIES`; 3). Retried: a
    /// failure to connect, a timeout, a dropped connection, a 5xx or 429 answer.
    pub retries: usize,
    /// No retry starts later than this after a request's first attempt
    /// (`BLZ_S3_RETRY_TIMEOUT`; 60 s).
    pub retry_timeout: Duration,
}

impl Default for S3Timeouts {
    fn default() -> Self {
        S3Timeouts::DEFAULT
    }
}

/// Reads a duration: a decimal number of seconds, or (`with_units`) a number followed by
/// `ms`, `s`, `m` or `h`.
fn parse_duration(var: &str, value: &str, with_units: bool) -> Result<Duration> {
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let scale = match unit.trim() {
        "" => 1.0,
        "ms" if with_units => 1e-3,
        "s" if with_units => 1.0,
        "m" | "min" if with_units => 60.0,
        "h" if with_units => 3600.0,
        _ => f64::NAN,
    };
    let secs = num.parse::<f64>().map_or(f64::NAN, |n| n * scale);
    if !(secs.is_finite() && secs > 0.0 && secs < 1e9) {
        return Err(Error::InvalidArgument(format!(
            "{var}={value:?}: expected a positive number of seconds{}",
            if with_units {
                " (or a number with a unit ms, s, m or h)"
            } else {
                ""
            }
        )));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl S3Timeouts {
    /// The values blz uses when no variable sets them: 10 s to connect, 30 s without a byte
    /// while reading, 300 s for one attempt of a request, 3 retries started within 60 s.
    pub const DEFAULT: S3Timeouts = S3Timeouts {
        connect: Duration::from_secs(10),
        idle: Duration::from_secs(30),
        request: Duration::from_secs(300),
        retries: 3,
        retry_timeout: Duration::from_secs(60),
    };

    /// The settings the environment of this process gives.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming a variable whose value is not a duration (or, for
    /// `BLZ_S3_RETRIES`, a count).
    pub fn from_env() -> Result<S3Timeouts> {
        S3Timeouts::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings the variables `var` returns give (`var(name)` is the value of the
    /// environment variable `name`, if set).
    ///
    /// # Errors
    /// As [`S3Timeouts::from_env`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<S3Timeouts> {
        let d = S3Timeouts::DEFAULT;
        let duration = |blz: &str, aws: Option<&str>, default: Duration| -> Result<Duration> {
            if let Some(v) = var(blz).filter(|v| !v.is_empty()) {
                return parse_duration(blz, &v, false);
            }
            match aws.and_then(|a| var(a).filter(|v| !v.is_empty()).map(|v| (a, v))) {
                Some((a, v)) => parse_duration(a, &v, true),
                None => Ok(default),
            }
        };
        let retries = match var("BLZ_S3_RETRIES").filter(|v| !v.is_empty()) {
            Some(v) => v.trim().parse::<usize>().map_err(|_| {
                Error::InvalidArgument(format!(
                    "BLZ_S3_RETRIES={v:?}: expected a whole number of retries"
                ))
            })?,
            None => d.retries,
        };
        Ok(S3Timeouts {
            connect: duration(
                "BLZ_S3_CONNECT_TIMEOUT",
                Some("AWS_CONNECT_TIMEOUT"),
                d.connect,
            )?,
            idle: duration("BLZ_S3_TIMEOUT", Some("AWS_READ_TIMEOUT"), d.idle)?,
            request: duration("BLZ_S3_REQUEST_TIMEOUT", Some("AWS_TIMEOUT"), d.request)?,
            retries,
            retry_timeout: duration("BLZ_S3_RETRY_TIMEOUT", None, d.retry_timeout)?,
        })
    }

    /// The longest a read waits on an endpoint that sends nothing (one that never answers,
    /// or stalls in the middle of an answer) before it fails:
    /// `retry_timeout + MAX_BACKOFF + idle` (95 s with the defaults; two attempts of 30 s
    /// in practice).
    pub fn silent_read_bound(&self) -> Duration {
        self.retry_timeout + MAX_BACKOFF + self.idle
    }

    /// The longest any request takes before it fails, whatever the endpoint does:
    /// `retry_timeout + MAX_BACKOFF + request` (365 s with the defaults).
    pub fn request_bound(&self) -> Duration {
        self.retry_timeout + MAX_BACKOFF + self.request
    }

    fn retry_config(&self) -> object_store::RetryConfig {
        object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: MAX_BACKOFF,
                base: 2.0,
            },
            max_retries: self.retries,
            retry_timeout: self.retry_timeout,
        }
    }
}

/// A duration as `object_store`'s configuration takes it.
fn config_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis().max(1))
}

/// Seconds for messages: `30 s`, `1.5 s`.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The S3 clients of a bucket: one for reads (with the no-progress bound) and one for
/// writes, and what error messages say of them.
#[derive(Clone)]
struct S3Clients {
    read: Arc<dyn ObjectStore>,
    write: Arc<dyn ObjectStore>,
    endpoint: String,
    timeouts: S3Timeouts,
}

/// The S3 clients for `bucket`, configured from the standard AWS environment variables
/// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ALLOW_HTTP`, ...) and [`S3Timeouts::from_env`]. Made once per bucket and
/// configuration in a process: a later open of a dataset there skips building them (about
/// 10 ms) and finds their connections open.
fn s3_clients(bucket: &str) -> Result<S3Clients> {
    /// Clients kept at most: past it (a process going through many configurations), the
    /// kept ones are dropped and made again when next used.
    const KEPT: usize = 64;
    // One per process: a forked child makes its own, whose connections are its own.
    static CLIENTS: blz_format::process::PerProcess<Mutex<HashMap<String, S3Clients>>> =
        blz_format::process::PerProcess::new();
    // Everything the clients are made from: the bucket and every variable read.
    let mut config: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("BLZ_S3_"))
        .collect();
    config.sort();
    let key = format!("{bucket}\n{config:?}");
    let clients = CLIENTS.get_or_init(Mutex::default);
    let lock = || {
        clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(c) = lock().get(&key) {
        return Ok(c.clone());
    }
    let made = make_s3_clients(bucket)?;
    let mut kept = lock();
    if kept.len() >= KEPT {
        kept.clear();
    }
    Ok(kept.entry(key).or_insert(made).clone())
}

/// New S3 clients for `bucket` ([`s3_clients`]).
fn make_s3_clients(bucket: &str) -> Result<S3Clients> {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as K};
    use object_store::ClientConfigKey as C;
    let timeouts = S3Timeouts::from_env()?;
    let base = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_retry(timeouts.retry_config())
        .with_config(
            K::Client(C::ConnectTimeout),
            config_duration(timeouts.connect),
        )
        .with_config(K::Client(C::Timeout), config_duration(timeouts.request));
    let endpoint = base.get_config_value(&K::Endpoint).unwrap_or_else(|| {
        let region = base
            .get_config_value(&K::Region)
            .unwrap_or_else(|| "us-east-1".into());
        format!("https://s3.{region}.amazonaws.com")
    });
    let base = sign_payloads(base, &endpoint, |name| std::env::var_os(name).is_some());
    let build = |b: AmazonS3Builder| -> Result<Arc<dyn ObjectStore>> {
        let store = b
            .build()
            .map_err(|e| Error::InvalidArgument(format!("s3://{bucket}: {e}")))?;
        Ok(Arc::new(store))
    };
    let read = build(
        base.clone()
            .with_config(K::Client(C::ReadTimeout), config_duration(timeouts.idle)),
    )?;
    let write = build(base)?;
    Ok(S3Clients {
        read,
        write,
        endpoint,
        timeouts,
    })
}

/// The environment variable `object_store` reads to set payload signing (`true` or
/// `false`).
pub const UNSIGNED_PAYLOAD_VAR: &str = "AWS_UNSIGNED_PAYLOAD";

/// `base` set to send request bodies to `endpoint` unsigned (`UNSIGNED-PAYLOAD`) or signed,
/// unless [`UNSIGNED_PAYLOAD_VAR`] `is_set` (then `base` as it is: the builder has read
/// the variable). Over HTTPS they go unsigned, as the AWS CLI's and SDKs' do: TLS guards
/// the bytes in transit (and every chunk carries its own checksum, checked when read), so
/// the SHA-256 a signed body needs would only be one more pass over every byte uploaded, on
/// the writer's CPU. Over plain HTTP the body is signed: nothing else guards its bytes
/// between client and server (`spec/object-store.md` §1).
fn sign_payloads(
    base: object_store::aws::AmazonS3Builder,
    endpoint: &str,
    is_set: impl Fn(&str) -> bool,
) -> object_store::aws::AmazonS3Builder {
    if is_set(UNSIGNED_PAYLOAD_VAR) {
        return base;
    }
    let scheme = endpoint.split_once("://").map_or("", |(s, _)| s);
    base.with_unsigned_payload(scheme.eq_ignore_ascii_case("https"))
}

/// The S3 client for `bucket`, configured from the standard AWS environment variables
/// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ALLOW_HTTP`, ...) and the timeouts of [`S3Timeouts::from_env`] (the no-progress
/// bound included: use it to read).
///
/// # Errors
/// [`Error::InvalidArgument`] when the configuration is incomplete or malformed.
pub fn s3_store(bucket: &str) -> Result<Arc<dyn ObjectStore>> {
    Ok(s3_clients(bucket)?.read)
}

impl ObjectStorage {
    /// The dataset `s3://bucket/key` (which need not exist yet), its state loaded now.
    ///
    /// # Errors
    /// As [`parse_s3_url`], [`s3_store`] and [`ObjectStorage::new`].
    pub fn open_url(url: &str) -> Result<ObjectStorage> {
        let (backend, bucket) = Backend::for_url(url)?;
        ObjectStorage::with_backend(backend, PathBuf::from(format!("s3://{bucket}")))
    }

    /// The dataset whose files lie under `prefix` in `store` (which need not exist yet),
    /// named `<base>/<prefix>` in paths and messages. Loads its state (one GET).
    ///
    /// # Errors
    /// I/O errors from the store; [`Error::InvalidMetadata`] for a malformed state object.
    pub fn new(store: Arc<dyn ObjectStore>, base: PathBuf, prefix: &str) -> Result<ObjectStorage> {
        ObjectStorage::with_backend(Backend::in_store(store, &base, prefix), base)
    }

    /// The dataset under `prefix` of an in-memory object store, named `memory://<prefix>`
    /// in paths and messages (which need not exist yet; its state loaded now): the
    /// object-store backend with no server, for tests and experiments. Handles made over one
    /// store see each other's commits as two processes see them on one bucket; each keeps
    /// the state it loaded until it commits or is made again.
    ///
    /// ```
    /// # fn main() -> blz_format::error::Result<()> {
    /// use blz_format::storage::{write_file_atomic, OpenMode, Storage};
    /// use blz_object::ObjectStorage;
    /// use std::sync::Arc;
    /// let store = Arc::new(object_store::memory::InMemory::new());
    /// let s = ObjectStorage::in_memory(&store, "runs/x.blz")?;
    /// let root = s.root().to_path_buf();
    /// s.create_dir_all(&root)?;
    /// write_file_atomic(&s, &root.join("hello"), b"hi")?;
    /// // The commit (blz makes it through its one commit door): now every handle sees it.
    /// s.publish(&root)?;
    /// let again = ObjectStorage::in_memory(&store, "runs/x.blz")?;
    /// let mut buf = [0u8; 2];
    /// again.open(&root.join("hello"), OpenMode::Read)?.read_at(0, &mut buf)?;
    /// assert_eq!(&buf, b"hi");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`ObjectStorage::new`].
    pub fn in_memory(
        store: &Arc<object_store::memory::InMemory>,
        prefix: &str,
    ) -> Result<ObjectStorage> {
        let store: Arc<dyn ObjectStore> = Arc::clone(store) as Arc<dyn ObjectStore>;
        ObjectStorage::new(store, PathBuf::from("memory://"), prefix)
    }

    /// The dataset `s3://bucket/key`, to be created there: made without waiting for its
    /// state, as if absent, while one GET of the state runs meanwhile (one round trip less
    /// before a create starts). Its commit (the first one: `If-None-Match`) first waits for
    /// that GET, and is refused with [`Error::InvalidArgument`] ("already exists") when the
    /// state was there (once the GET has found it, no file goes up early any more: its sync
    /// fails with that error). To replace a
    /// dataset, open it with [`ObjectStorage::open_url`] instead.
    ///
    /// # Errors
    /// As [`parse_s3_url`] and [`s3_store`].
    pub fn open_url_to_create(url: &str) -> Result<ObjectStorage> {
        let (backend, bucket) = Backend::for_url(url)?;
        ObjectStorage::assumed_absent(backend, PathBuf::from(format!("s3://{bucket}")))
    }

    /// [`ObjectStorage::new`] for a dataset to be created (as
    /// [`open_url_to_create`](Self::open_url_to_create)): its state's GET runs meanwhile.
    ///
    /// # Errors
    /// As [`ObjectStorage::new`].
    pub fn to_create(
        store: Arc<dyn ObjectStore>,
        base: PathBuf,
        prefix: &str,
    ) -> Result<ObjectStorage> {
        ObjectStorage::assumed_absent(Backend::in_store(store, &base, prefix), base)
    }

    fn assumed_absent(backend: Backend, base: PathBuf) -> Result<ObjectStorage> {
        let backend = Arc::new(backend);
        let b = Arc::clone(&backend);
        let probe = std::thread::Builder::new()
            .name("blz-state-probe".into())
            // Whether a state exists: its manifests are not needed.
            .spawn(move || {
                b.fetch_state_with(false)
                    .map(|(state, _, _)| state.is_some())
            })
            .map_err(|e| Error::io("read the state of", &backend.root, e))?;
        let committed = Committed {
            probe: Some(Probe::Pending(probe)),
            ..Committed::default()
        };
        Ok(ObjectStorage::with_committed(backend, base, committed))
    }

    fn with_backend(backend: Backend, base: PathBuf) -> Result<ObjectStorage> {
        // The manifests wait until a file the state object does not hold is wanted: a read of
        // the files it holds (the last ones appended) costs no more requests.
        let (state, version, stored_at) = backend.fetch_state_with(false)?;
        let committed = Committed {
            state,
            version,
            stored_at,
            ..Committed::default()
        };
        Ok(ObjectStorage::with_committed(
            Arc::new(backend),
            base,
            committed,
        ))
    }

    /// A handle on `backend`'s dataset that shows `committed`.
    fn with_committed(backend: Arc<Backend>, base: PathBuf, committed: Committed) -> ObjectStorage {
        let s = ObjectStorage {
            backend,
            base,
            tree: Mutex::default(),
            committed: Arc::new(Mutex::new(committed)),
        };
        s.reset_tree();
        s
    }

    /// The dataset root, as paths name it (`s3://bucket/prefix`).
    pub fn root(&self) -> &Path {
        &self.backend.root
    }

    /// Requests made to the object store through this handle so far.
    pub fn requests(&self) -> u64 {
        self.backend.requests.load(Ordering::Relaxed)
    }

    /// How this handle turns reads of many ranges into requests ([`ReadTuning`]: from the
    /// environment for [`ObjectStorage::open_url`], the default otherwise).
    pub fn read_tuning(&self) -> ReadTuning {
        self.backend.read_tuning().0
    }

    /// Sets how this handle (and every file it opened) turns reads of many ranges into
    /// requests, from its next read on.
    pub fn set_read_tuning(&self, tuning: ReadTuning) {
        *self
            .backend
            .reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = (tuning, read_slots(&tuning));
    }

    /// Sets how many bytes of block indexes (as their fronts' `blocks` text) this handle's
    /// commits put in the state object, which every open reads whole: past them, in path
    /// order, a file's index goes up as an object of its own, read on the first short read
    /// of the file (`spec/object-store.md` §3). [`MAX_BLOCK_INDEXES`] unless set, or the
    /// environment's [`INLINE_INDEXES_VAR`] for a handle made from an `s3://` URL.
    pub fn set_inline_block_indexes(&self, bytes: u64) {
        self.backend.inline_indexes.store(bytes, Ordering::Relaxed);
    }

    /// Sets the bytes of unchanged file entries this handle's commits gather in the state
    /// object before sealing them into a manifest (`spec/object-store.md` §3, "Manifests");
    /// 0 seals none. [`manifest::MANIFEST_BYTES`] unless set, or the environment's
    /// [`manifest::MANIFEST_BYTES_VAR`] for a handle made from an `s3://` URL.
    pub fn set_manifest_bytes(&self, bytes: u64) {
        self.backend.manifest_bytes.store(bytes, Ordering::Relaxed);
    }

    /// The committed state this handle works on (`None` before the dataset's first commit).
    ///
    /// # Errors
    /// As [`ObjectStorage::new`], for the manifests the state names, read now if not yet.
    pub fn state(&self) -> Result<Option<State>> {
        self.load_pending()?;
        Ok(self.committed_lock().state.clone())
    }

    /// Reads the manifests the committed state names, if this handle has not yet, and adds
    /// their files to the visible tree (where the overlay has not put a file of its own at
    /// a path). Every listing calls it first ([`Self::load_pending_where`] for the rest).
    ///
    /// # Errors
    /// As [`ObjectStorage::new`]; the handle stays as it was (the next call tries again).
    fn load_pending(&self) -> Result<()> {
        self.load_pending_where(|_| true)
    }

    /// [`Self::load_pending`] for the manifests `which` picks: every change to a path a
    /// manifest may hold ([`manifest::Manifest::may_hold`]) reads that manifest first,
    /// every lookup that misses such a path reads it, and a commit reads the manifests its
    /// merges take in: so the overlay never removed, replaced or renamed a file it did not
    /// see, and a commit keeps every manifest it did not load as it is.
    ///
    /// # Errors
    /// As [`ObjectStorage::new`]; the handle stays as it was (the next call tries again).
    fn load_pending_where(&self, which: impl Fn(&Manifest) -> bool) -> Result<()> {
        let mut c = self.committed_lock();
        // Nothing to read (and no copy of the state) unless a manifest not read yet is picked.
        let Some(state) = c
            .state
            .as_ref()
            .filter(|s| s.manifests.iter().any(|m| !m.loaded && which(m)))
        else {
            return Ok(());
        };
        let mut full = state.clone();
        self.backend.load_manifests(&mut full, which)?;
        {
            let mut tree = self.tree();
            // The manifests read now (`load_manifests` keeps their order).
            let new = full
                .manifests
                .iter()
                .zip(&state.manifests)
                .filter(|(now, was)| now.loaded && !was.loaded)
                .map(|(now, _)| now);
            for rel in new.flat_map(|m| &m.paths) {
                if let Some(f) = full.files.get(rel) {
                    tree.files
                        .entry(self.rel_to_bucket(rel))
                        .or_insert_with(|| node_of(f));
                }
            }
        }
        c.state = Some(full);
        Ok(())
    }

    /// `key` (relative to the bucket) relative to the dataset's root, `None` outside it.
    fn rel_of_key<'k>(&self, key: &'k str) -> Option<&'k str> {
        if self.backend.prefix.is_empty() {
            Some(key)
        } else if key == self.backend.prefix {
            Some("")
        } else {
            key.strip_prefix(self.backend.prefix.as_str())
                .and_then(|r| r.strip_prefix('/'))
        }
    }

    /// Reads the pending manifests that may hold `key` (relative to the bucket), as their
    /// directories and spans tell ([`manifest::Manifest::may_hold`]), and only those: what
    /// a change at `key` does first, so that the overlay never replaces, removes or renames
    /// a file it did not see.
    ///
    /// # Errors
    /// As [`ObjectStorage::load_pending`].
    fn load_if_may_hold(&self, key: &str) -> Result<()> {
        match self.rel_of_key(key) {
            Some(rel) => self.load_pending_where(|m| m.may_hold(rel)),
            None => Ok(()),
        }
    }

    /// Whether the visible tree answers `found` of `key` (true), after reading the pending
    /// manifests when it did not at first and one of them may hold `key`. When they cannot
    /// be read, the answer is yes: the file may be there, and the caller's next step (an
    /// open, a listing) fails with the reason, where a no would let it go on as if the
    /// file were absent.
    fn found_or_loaded(&self, key: &str, found: impl Fn(&Tree) -> bool) -> bool {
        if found(&self.tree()) {
            return true;
        }
        // With no manifest to read, the load does nothing and the tree answers as before.
        self.load_if_may_hold(key)
            .map_or(true, |()| found(&self.tree()))
    }

    fn committed_lock(&self) -> MutexGuard<'_, Committed> {
        lock_committed(&self.committed)
    }

    fn tree(&self) -> MutexGuard<'_, Tree> {
        self.tree
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn state_path(&self) -> PathBuf {
        self.backend.root.join(STATE_KEY)
    }

    /// Makes the visible tree the committed state again (no overlay).
    fn reset_tree(&self) {
        let committed = self.committed_lock();
        let mut tree = Tree::default();
        if let Some(state) = &committed.state {
            for (rel, f) in &state.files {
                tree.files.insert(self.rel_to_bucket(rel), node_of(f));
            }
        }
        *self.tree() = tree;
    }

    fn rel_to_bucket(&self, rel: &str) -> String {
        if self.backend.prefix.is_empty() {
            rel.to_string()
        } else {
            format!("{}/{rel}", self.backend.prefix)
        }
    }

    /// The key below the bucket that `path` names.
    fn key_of(&self, path: &Path) -> Result<String> {
        let rel = path.strip_prefix(&self.base).map_err(|_| {
            Error::InvalidArgument(format!(
                "{} is not on {}",
                path.display(),
                self.base.display()
            ))
        })?;
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                std::path::Component::Normal(n) => parts.push(n.to_str().ok_or_else(|| {
                    Error::InvalidArgument(format!("{} is not UTF-8", path.display()))
                })?),
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "{} is not a plain path",
                        path.display()
                    )))
                }
            }
        }
        Ok(parts.join("/"))
    }

    /// Uploads every file changed under the dataset root and commits the new state with a
    /// conditional write. On [`Error::Conflict`] (or any failure of the state write) the
    /// overlay is dropped: this handle shows the state it loaded, and must be reopened.
    fn publish_root(&self, front: &FrontRanges<'_>) -> Result<()> {
        // A create's handle commits only once it knows the dataset absent.
        settle_probe(&self.committed, &self.backend.root, true)?;
        // The manifests not loaded yet stay as they are: every change to a file one of them
        // may hold loaded them first.
        let prefix_slash = format!("{}/", self.backend.prefix);
        let files: Vec<(String, Arc<Node>)> = self
            .tree()
            .files
            .iter()
            .filter_map(|(k, n)| {
                k.strip_prefix(&prefix_slash)
                    .map(|r| (r.to_string(), Arc::clone(n)))
            })
            .collect();
        let (mut old, version, superseded, loaded_at, tag) = {
            let c = self.committed_lock();
            (
                c.state.clone(),
                c.version.clone(),
                c.superseded,
                c.stored_at,
                // The files that went up early named their objects with it.
                c.draft_tag.unwrap_or_else(rand::random),
            )
        };
        let generation = match &old {
            None => 1,
            Some(s) => s.generation.checked_add(1).ok_or_else(|| {
                Error::metadata(
                    self.root().join(STATE_KEY),
                    format!("its generation {} cannot advance", s.generation),
                )
            })?,
        };
        let mut new_files = BTreeMap::new();
        let mut uploads: Vec<Upload> = Vec::new();
        let mut changed = false;
        for (rel, node) in &files {
            let spooled = matches!(&*lock_data(node), Data::Spool(_));
            if spooled {
                changed = true;
                let key = self.commit_key(rel, node, generation, tag);
                let (entry, upload) = self.plan_spooled(rel, node, key, front)?;
                uploads.extend(upload);
                new_files.insert(rel.clone(), entry);
                continue;
            }
            let d = lock_data(node);
            let entry = match &*d {
                Data::Remote {
                    pieces, len, front, ..
                } => entry_of(pieces, *len, front.as_ref().map(|f| f.front.clone())),
                Data::Memory(b) => match std::str::from_utf8(b) {
                    Ok(t) => StateFile::Inline {
                        text: t.to_string(),
                    },
                    Err(_) => {
                        changed = true;
                        let key = self.commit_key(rel, node, generation, tag);
                        uploads.push(Upload {
                            rel: rel.clone(),
                            key: key.clone(),
                            node: Arc::clone(node),
                            ranges: None,
                        });
                        StateFile::Object {
                            key,
                            len: b.len() as u64,
                            front: None,
                        }
                    }
                },
                Data::Spool(_) => {
                    return Err(Error::io(
                        "commit",
                        self.backend.root.join(rel),
                        std::io::Error::other("the file was written while it was committed"),
                    ))
                }
            };
            new_files.insert(rel.clone(), entry);
        }
        // Every open reads the state whole: the block indexes it carries are bounded. Past
        // the bound, a file's index goes up as an object of its own, named for this commit.
        // The entries of a manifest the commit keeps (none of its files changed) are in the
        // manifest, not the state: they take none of the room (moving their indexes out
        // would change them, and rewrite their manifests for nothing).
        let sealed_as_is: HashSet<&str> = old.as_ref().map_or_else(HashSet::new, |o| {
            o.manifests
                .iter()
                .filter(|m| m.kept(&o.files, &new_files))
                .flat_map(|m| m.paths.iter().map(String::as_str))
                .collect()
        });
        let mut room = self.backend.inline_indexes.load(Ordering::Relaxed);
        let mut indexes: Vec<(String, Bytes)> = Vec::new();
        for (rel, f) in &mut new_files {
            if sealed_as_is.contains(rel.as_str()) {
                continue;
            }
            let Some(fr) = f.front_mut().and_then(Option::as_mut) else {
                continue;
            };
            let Some(b) = &fr.blocks else {
                continue;
            };
            match room.checked_sub(b.len() as u64) {
                Some(r) => room = r,
                None => {
                    let packed = base64_decode(b).unwrap_or_default();
                    fr.blocks = None;
                    if !packed.is_empty() {
                        let key = format!("{rel}.{generation}-{tag:016x}.blocks");
                        fr.blocks_object = Some(ExtentObject {
                            key: key.clone(),
                            size: packed.len() as u64,
                        });
                        indexes.push((key, Bytes::from(packed)));
                    }
                }
            }
        }
        if old.as_ref().is_some_and(|s| s.files == new_files) && !changed {
            return Ok(());
        }
        // The entries this commit left as they were go (or stay) in manifests of their own.
        let seal = self.backend.manifest_bytes.load(Ordering::Relaxed);
        let plan = |old: Option<&State>, files: &BTreeMap<String, StateFile>| {
            manifest::plan(old, files, seal, generation, tag)
                .map_err(|e| Error::metadata(self.state_path(), e))
        };
        let mut sealed = plan(old.as_ref(), &new_files)?;
        while !sealed.needs_load.is_empty() {
            // A merge takes in manifests not loaded: those (only) are read, and their files
            // join the commit's, unchanged. Each round loads at least one manifest, so this
            // ends (a merged manifest may complete a group of the next level).
            let wanted = std::mem::take(&mut sealed.needs_load);
            self.load_pending_where(|m| wanted.contains(&m.key))?;
            old = self.committed_lock().state.clone();
            if let Some(o) = &old {
                let loaded = o.manifests.iter().filter(|m| wanted.contains(&m.key));
                if loaded.clone().any(|m| !m.loaded) {
                    return Err(Error::metadata(
                        self.state_path(),
                        format!("the manifests {wanted:?} to merge were not read"),
                    ));
                }
                for rel in loaded.flat_map(|m| &m.paths) {
                    if let (false, Some(f)) = (new_files.contains_key(rel), o.files.get(rel)) {
                        new_files.insert(rel.clone(), f.clone());
                    }
                }
            }
            sealed = plan(old.as_ref(), &new_files)?;
        }
        indexes.extend(sealed.uploads);
        let result = if superseded {
            Err(Error::Conflict {
                path: self.backend.root.clone(),
            })
        } else {
            Ok(())
        };
        let result = result
            .and_then(|()| self.finish_early())
            .and_then(|()| self.localize(&uploads))
            .and_then(|()| self.upload(&uploads, &indexes))
            .and_then(|()| {
                let now = now_secs();
                let mut retired = old.as_ref().map(|s| s.retired.clone()).unwrap_or_default();
                // Everything retired so far was retired by the loaded state or before it: by the
                // time the store stored that state, by the store's clock.
                for r in &mut retired {
                    r.stored_by = r.stored_by.or(loaded_at);
                }
                if let Some(o) = &old {
                    // An object is retired only when no entry (whole, or by one extent) names it.
                    let still: HashSet<&str> =
                        new_files.values().flat_map(StateFile::keys).collect();
                    let mut gone = BTreeSet::new();
                    let manifests = sealed.retired.iter().map(String::as_str);
                    for key in o.files.values().flat_map(StateFile::keys).chain(manifests) {
                        if !still.contains(key) && gone.insert(key) {
                            retired.push(Retired {
                                key: key.to_string(),
                                at: now,
                                generation: Some(generation),
                                stored_by: None,
                            });
                        }
                    }
                }
                let mut state = State {
                    format: STATE_FORMAT.into(),
                    version: State::version_for(&new_files, &sealed.manifests),
                    generation,
                    committed_at: now,
                    files: new_files,
                    retired,
                    write_id: old.as_ref().and_then(|s| s.write_id.clone()),
                    earlier_write_ids: old
                        .as_ref()
                        .map(|s| s.earlier_write_ids.clone())
                        .unwrap_or_default(),
                    manifests: sealed.manifests,
                };
                state.stamp_write();
                let w = self.write_state(&mut state, version.as_ref())?;
                *self.committed_lock() = Committed::written(state, w);
                Ok(())
            });
        match result {
            Ok(()) => {
                // The written files are read from their objects from now on (the spool goes),
                // inline ones from memory.
                let uploaded: HashSet<&str> = uploads.iter().map(|u| u.rel.as_str()).collect();
                let committed = self.committed_lock();
                if let Some(state) = &committed.state {
                    for (rel, node) in &files {
                        let Some(entry) = state.files.get(rel) else {
                            continue;
                        };
                        let mut d = lock_data(node);
                        if !matches!(&*d, Data::Spool(_)) && !uploaded.contains(rel.as_str()) {
                            continue;
                        }
                        *d = match entry {
                            StateFile::Inline { text } => {
                                Data::Memory(Bytes::from(text.clone().into_bytes()))
                            }
                            StateFile::Object { len, front, .. }
                            | StateFile::Extents { len, front, .. } => Data::Remote {
                                pieces: pieces_of(entry),
                                len: *len,
                                head: None,
                                front: front.clone().map(FrontCopy::new),
                            },
                        };
                    }
                }
                Ok(())
            }
            Err(e) => {
                self.reset_tree();
                self.forget_draft();
                Err(e)
            }
        }
    }

    /// The key the commit uploads the file `rel` (held by `node`) under:
    /// `<rel>.<generation>-<tag>`, unless an early upload of another file (written at `rel`,
    /// renamed since) holds that key, when a second tag is drawn for this file alone.
    fn commit_key(&self, rel: &str, node: &Node, generation: u64, tag: u64) -> String {
        let key = format!("{rel}.{generation}-{tag:016x}");
        let own = match &*lock_data(node) {
            Data::Spool(sp) => sp.early.as_ref().is_some_and(|e| e.key == key),
            _ => false,
        };
        if !own && self.committed_lock().draft_keys.contains(&key) {
            return format!("{rel}.{generation}-{:016x}", rand::random::<u64>());
        }
        key
    }

    /// Drops the commit being prepared: the files that went up early are orphans now (gc
    /// collects them), and the next commit draws a new tag.
    fn forget_draft(&self) {
        let mut c = self.committed_lock();
        c.draft_tag = None;
        c.draft_keys.clear();
        c.draft_tasks.clear();
        c.draft_failed = None;
    }

    /// Waits for every early upload of the commit being prepared still running
    /// ([`ObjectFile::upload_early`]), all at once, before anything else goes up (a file
    /// the commit uploads may take a key an outdated early upload had); the first failure
    /// is the error.
    fn finish_early(&self) -> Result<()> {
        let (tasks, failed) = {
            let mut c = self.committed_lock();
            (std::mem::take(&mut c.draft_tasks), c.draft_failed.clone())
        };
        let waited = join_uploads(&self.backend.root, tasks);
        match failed {
            Some(why) => Err(Error::io(
                "upload",
                &self.backend.root,
                std::io::Error::other(why),
            )),
            None => waited,
        }
    }

    /// The copy of the first-read bytes of the spooled file `rel` (held by `node`) that
    /// `front` asks for, if it asks for one within [`MAX_FRONT`] bytes.
    fn front_of(&self, rel: &str, node: &Arc<Node>, front: &FrontRanges<'_>) -> Option<Front> {
        self.read_front(&self.backend.root.join(rel), node, front)
            .ok()
            .flatten()
    }

    /// The block index of the spooled file `rel` (held by `node`) at this commit
    /// ([`blz_format::blpk::block_index`]: `written`, the ranges written, `None` for a new file;
    /// `old`, the committed file's index).
    fn blocks_of(
        &self,
        rel: &str,
        node: &Arc<Node>,
        written: Option<&[std::ops::Range<u64>]>,
        old: Option<&BlockIndex>,
    ) -> Option<BlockIndex> {
        let file = self.view(&self.backend.root.join(rel), node);
        blz_format::blpk::block_index(&file, written, old)
    }

    /// The copy of `front` (of the file held by `node`, named `path`, `size` bytes long,
    /// whose front the node holds) with the block index its worker put as `name` in `dir`,
    /// when that fits the file: it decodes, and every record lies at an offset of the file's
    /// offsets table, its chunk inside its place. `None` otherwise.
    fn worker_index(
        &self,
        dir: &dyn SharedDir,
        name: &str,
        path: &Path,
        node: &Arc<Node>,
        front: Front,
        size: u64,
    ) -> Result<Option<Arc<FrontCopy>>> {
        let Some(packed) = dir.get(name, MAX_FRONT)? else {
            return Ok(None);
        };
        let copy = FrontCopy::new(Front {
            blocks: Some(base64_encode(&packed)),
            ..front
        });
        // Read from the front the node holds: no request.
        let (Ok(Some(index)), Ok(layout)) = (
            copy.block_index(),
            blz_format::blpk::Layout::read(&self.view(path, node)),
        ) else {
            return Ok(None);
        };
        // Each offset's room (the largest, should a table name an offset twice).
        let mut room: HashMap<u64, u64> = HashMap::new();
        for (&o, e) in layout.offsets.iter().zip(layout.extents()) {
            let r = room.entry(o).or_default();
            *r = (*r).max(e);
        }
        let fits = index.iter().all(|(off, cb)| {
            room.get(off)
                .is_some_and(|&e| cb.cbytes() as u64 <= e && off + e <= size)
        });
        Ok(fits.then_some(copy))
    }

    /// The file held by `node` (named `path`), to read as this handle sees it.
    fn view(&self, path: &Path, node: &Arc<Node>) -> ObjectFile {
        ObjectFile {
            node: Arc::clone(node),
            backend: Arc::clone(&self.backend),
            path: path.to_path_buf(),
            writable: false,
            committed: Arc::clone(&self.committed),
        }
    }

    /// The front of the file held by `node` (named `path`): the ranges `front` asks for, if
    /// within [`MAX_FRONT`] bytes, read through the file. `Ok(None)` when it asks for none
    /// or too many; an error when reading them fails.
    fn read_front(
        &self,
        path: &Path,
        node: &Arc<Node>,
        front: &FrontRanges<'_>,
    ) -> Result<Option<Front>> {
        let file = self.view(path, node);
        let Some(ranges) = front(&file) else {
            return Ok(None);
        };
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        if total == 0 || total > MAX_FRONT {
            return Ok(None);
        }
        let mut bytes = vec![0u8; total as usize];
        let mut at = 0usize;
        for r in &ranges {
            let n = (r.end - r.start) as usize;
            file.read_at(r.start, &mut bytes[at..at + n])?;
            at += n;
        }
        Ok(Front::new(&ranges, &bytes))
    }

    /// The state entry of the spooled file `rel` (held by `node`) at this commit, and what
    /// to upload for it under `key`: the bytes the transaction wrote (with the file's new
    /// front, so that it is one piece), the rest of the file staying in the objects that
    /// held it; or the whole file when it has no committed bytes left, or when the entry
    /// would list more than [`MAX_EXTENTS`] extents or name objects of more than twice the
    /// file's length (the compaction, `spec/object-store.md` §4).
    fn plan_spooled(
        &self,
        rel: &str,
        node: &Arc<Node>,
        key: String,
        front: &FrontRanges<'_>,
    ) -> Result<(StateFile, Option<Upload>)> {
        let path = self.backend.root.join(rel);
        let len = match &*lock_data(node) {
            Data::Spool(sp) => sp.len,
            Data::Memory(b) => b.len() as u64,
            Data::Remote { len, .. } => *len,
        };
        if rel.starts_with("meta/") && len <= INLINE_MAX as u64 {
            let bytes = node_bytes(&self.backend, node, &path, None)?;
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let text = text.to_string();
                return Ok((StateFile::Inline { text }, None));
            }
        }
        // Up already, whole, as it is now (under the key of the path it was written at,
        // if it was renamed since): the commit names that object.
        let early = match &mut *lock_data(node) {
            Data::Spool(sp) => {
                let version = sp.version;
                sp.early
                    .as_mut()
                    .filter(|e| e.version == version)
                    .map(|e| (e.key.clone(), e.index.take()))
            }
            _ => None,
        };
        if let Some((key, index)) = early {
            let front = self.front_of(rel, node, front).map(|f| {
                // Worked out beside the upload (it is done by now), else here.
                let index = match index {
                    Some(task) => runtime()
                        .ok()
                        .and_then(|rt| rt.block_on(task).ok().flatten()),
                    None => self.blocks_of(rel, node, None, None),
                };
                f.with_blocks(index.as_ref())
            });
            return Ok((StateFile::Object { key, len, front }, None));
        }
        // A file changed in part indexes the chunks written, and keeps the entries of the
        // chunks not touched; a new one indexes all.
        let (fresh, old_front) = match &*lock_data(node) {
            Data::Spool(sp) if !sp.base.is_empty() => (Some(sp.written.clone()), sp.front.clone()),
            _ => (None, None),
        };
        let new_front = self.front_of(rel, node, front).map(|f| {
            let old = old_front.as_ref().and_then(|o| {
                self.backend
                    .front_index(o, &self.backend.root.join(rel))
                    .ok()
                    .flatten()
            });
            let index = self.blocks_of(rel, node, fresh.as_deref(), old.as_deref());
            f.with_blocks(index.as_ref())
        });
        let upload = |ranges| Upload {
            rel: rel.to_string(),
            key: key.clone(),
            node: Arc::clone(node),
            ranges,
        };
        let whole = || {
            let entry = StateFile::Object {
                key: key.clone(),
                len,
                front: new_front.clone(),
            };
            Ok((entry, Some(upload(None))))
        };
        let d = lock_data(node);
        let Data::Spool(sp) = &*d else {
            return whole();
        };
        if sp.base.is_empty() {
            return whole();
        }
        let mut written = sp.written.clone();
        if let (false, Some(f)) = (written.is_empty(), &new_front) {
            for &[a, n] in &f.ranges {
                add_range(&mut written, a..a + n);
            }
        }
        let size: u64 = written.iter().map(|r| r.end - r.start).sum();
        let new_key: Arc<str> = Arc::from(key.as_str());
        let mut pieces = Vec::new();
        let (mut pos, mut at) = (0u64, 0u64);
        for w in &written {
            pieces.extend(slice_pieces(&sp.base, pos..w.start));
            pieces.push(Piece {
                key: Arc::clone(&new_key),
                size,
                at,
                len: w.end - w.start,
            });
            at += w.end - w.start;
            pos = w.end;
        }
        pieces.extend(slice_pieces(&sp.base, pos..len));
        let pieces = join_pieces(pieces);
        let covered: u64 = pieces.iter().map(|p| p.len).sum();
        let mut objects: BTreeMap<&str, u64> = BTreeMap::new();
        for p in &pieces {
            objects.insert(&*p.key, p.size);
        }
        let named: u64 = objects.values().sum();
        if covered != len || pieces.len() > MAX_EXTENTS || named > len.saturating_mul(2) {
            drop(d);
            return whole();
        }
        let entry = entry_of(&pieces, len, new_front);
        Ok((entry, (size > 0).then(|| upload(Some(written)))))
    }

    /// Brings every byte the uploads read into their spool files ([`Spool::localize`]).
    fn localize(&self, uploads: &[Upload]) -> Result<()> {
        for u in uploads {
            if let Data::Spool(sp) = &mut *lock_data(&u.node) {
                let whole = 0..sp.len;
                let ranges = u.ranges.as_deref().unwrap_or(std::slice::from_ref(&whole));
                sp.localize(&self.backend, ranges, &self.backend.root.join(&u.rel))?;
            }
        }
        Ok(())
    }

    /// Uploads what the commit writes of each file (one PUT each), and the block indexes
    /// `indexes` (key, zlib stream) that the state names but does not carry, [`PARALLEL`]
    /// at a time, holding at most [`UPLOAD_BUDGET_MIB`] of files' bytes in memory (with the
    /// early uploads).
    fn upload(&self, uploads: &[Upload], indexes: &[(String, Bytes)]) -> Result<()> {
        use futures::future::Either;
        let rt = runtime()?;
        let jobs: Vec<(PathBuf, &Upload)> = uploads
            .iter()
            .map(|u| (self.backend.root.join(&u.rel), u))
            .collect();
        let backend = &self.backend;
        let index_puts = futures::stream::iter(indexes).map(|(key, bytes)| {
            Either::Right(async move {
                backend
                    .upload(key, &backend.root.join(key), bytes.clone())
                    .await
            })
        });
        rt.block_on(async move {
            futures::stream::iter(jobs)
                .map(|(path, u)| {
                    Either::Left(async move {
                        let (key, node) = (u.key.as_str(), &u.node);
                        let len = match (&u.ranges, &*lock_data(node)) {
                            (Some(r), _) => r.iter().map(|r| r.end - r.start).sum(),
                            (None, Data::Spool(sp)) => sp.len,
                            (None, Data::Memory(b)) => b.len() as u64,
                            (None, Data::Remote { len, .. }) => *len,
                        };
                        let _room = upload_budget()
                            .acquire_many(budget_of(len))
                            .await
                            .map_err(|e| Error::io("upload", &path, std::io::Error::other(e)))?;
                        let bytes = node_bytes(backend, node, &path, u.ranges.as_deref())?;
                        backend.upload(key, &path, bytes).await
                    })
                })
                .chain(index_puts)
                .buffer_unordered(PARALLEL)
                .try_collect::<Vec<()>>()
                .await
        })
        .map(drop)
    }

    /// Writes the state object (stamped with its write id, [`State::stamp_write`]):
    /// if-match `version`, or create-if-absent without one. When the write fails in any way
    /// (refused, an error, an answer lost to a timeout while a retry then finds the state
    /// changed: by this very write), the state object is read back: the write took effect
    /// if and only if the state there records its write id. Only a write that did not take
    /// effect is reported: [`Error::Conflict`] when the store refused it, else the error.
    ///
    /// A state longer than a reader reads ([`MAX_STATE`]) leaves files' fronts out first
    /// ([`state_bytes`]); one too long without them is not written.
    fn write_state(&self, state: &mut State, version: Option<&UpdateVersion>) -> Result<Written> {
        let rt = runtime()?;
        let path = self.state_path();
        let bytes = state_bytes(state, MAX_STATE, &path)?;
        let mode = match version {
            Some(v) => PutMode::Update(v.clone()),
            None => PutMode::Create,
        };
        let loc = self.backend.key(STATE_KEY);
        let condition = if version.is_some() {
            "if-match"
        } else {
            "if-none-match"
        };
        self.backend
            .note("PUT", STATE_KEY, format_args!("{condition}"));
        let started = std::time::Instant::now();
        let r = rt.block_on(self.backend.client(Client::Write).put_opts(
            &loc,
            PutPayload::from(bytes),
            PutOptions {
                mode,
                ..PutOptions::default()
            },
        ));
        let failure = match r {
            Ok(r) => {
                return Ok(Written::Current(UpdateVersion {
                    e_tag: r.e_tag,
                    version: r.version,
                }))
            }
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Error::Conflict {
                path: self.backend.root.clone(),
            },
            Err(e) => self
                .backend
                .error("commit", &path, Client::Write, started, e),
        };
        let Some(id) = state.write_id.as_deref() else {
            return Err(failure);
        };
        // The write ids are in the state object itself: its manifests are not needed.
        match self.backend.fetch_state_with(false) {
            Ok((Some(now), Some(v), _)) if now.records_write(id) => {
                if now.write_id.as_deref() == Some(id) {
                    Ok(Written::Current(v))
                } else {
                    Ok(Written::Superseded)
                }
            }
            Ok(_) => Err(failure),
            Err(again) => Err(Error::io(
                "commit",
                &path,
                std::io::Error::new(
                    match &failure {
                        Error::Io { source, .. } => source.kind(),
                        _ => ErrorKind::Other,
                    },
                    format!(
                        "the conditional write of the state failed ({failure}), and reading \
                         the state back to learn whether it took effect failed too ({again}): \
                         whether the commit took effect is unknown; open the dataset again to \
                         see"
                    ),
                ),
            )),
        }
    }
}

impl Storage for ObjectStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        let key = self.key_of(path)?;
        // A create replaces a file a manifest may hold: the commit must see that file.
        if mode == OpenMode::Create || !self.tree().files.contains_key(&key) {
            self.load_if_may_hold(&key)?;
        }
        let node = {
            let mut tree = self.tree();
            match mode {
                OpenMode::Read | OpenMode::ReadWrite => tree
                    .files
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| not_found("open", path))?,
                OpenMode::Create => {
                    if tree.is_dir(&key) {
                        return Err(Error::io(
                            "create",
                            path,
                            std::io::Error::new(ErrorKind::IsADirectory, "a directory"),
                        ));
                    }
                    let node = Node::spool(path)?;
                    tree.files.insert(key, Arc::clone(&node));
                    node
                }
            }
        };
        Ok(Box::new(ObjectFile {
            node,
            backend: Arc::clone(&self.backend),
            path: path.to_path_buf(),
            writable: mode != OpenMode::Read,
            committed: Arc::clone(&self.committed),
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let key = self.key_of(dir)?;
        self.load_pending()?;
        let tree = self.tree();
        if !tree.is_dir(&key) {
            return Err(not_found("list", dir));
        }
        let p = if key.is_empty() {
            String::new()
        } else {
            format!("{key}/")
        };
        let mut names = BTreeSet::new();
        let below = |k: &String| {
            k.strip_prefix(&p)
                .and_then(|r| r.split('/').next())
                .map(str::to_string)
        };
        for k in tree
            .files
            .range(p.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&p))
        {
            names.extend(below(k));
        }
        for k in tree
            .dirs
            .range(p.clone()..)
            .take_while(|k| k.starts_with(&p))
        {
            names.extend(below(k));
        }
        // The state object is the commit, not a file of the dataset.
        if key == self.rel_to_bucket("meta") {
            names.remove("state");
        }
        Ok(names.into_iter().filter(|n| !n.is_empty()).collect())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (f, t) = (self.key_of(from)?, self.key_of(to)?);
        self.load_if_may_hold(&f)?;
        self.load_if_may_hold(&t)?;
        let mut tree = self.tree();
        if let Some(node) = tree.files.remove(&f) {
            tree.files.insert(t, node);
            return Ok(());
        }
        if !tree.is_dir(&f) || f.is_empty() {
            return Err(not_found("rename", from));
        }
        let (fp, tp) = (format!("{f}/"), format!("{t}/"));
        // A directory replaces a directory whole.
        tree.files.retain(|k, _| !k.starts_with(&tp));
        tree.dirs.retain(|k| !k.starts_with(&tp) && *k != t);
        let moved: Vec<String> = tree
            .files
            .keys()
            .filter(|k| k.starts_with(&fp))
            .cloned()
            .collect();
        for k in moved {
            if let Some(n) = tree.files.remove(&k) {
                tree.files.insert(format!("{tp}{}", &k[fp.len()..]), n);
            }
        }
        let dirs: Vec<String> = tree
            .dirs
            .iter()
            .filter(|k| k.starts_with(&fp) || **k == f)
            .cloned()
            .collect();
        for k in dirs {
            tree.dirs.remove(&k);
            let nk = if k == f {
                t.clone()
            } else {
                format!("{tp}{}", &k[fp.len()..])
            };
            tree.dirs.insert(nk);
        }
        tree.dirs.insert(t);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        self.load_if_may_hold(&key)?;
        self.tree().files.remove(&key);
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        self.load_if_may_hold(&key)?;
        let p = format!("{key}/");
        let mut tree = self.tree();
        tree.files.retain(|k, _| !k.starts_with(&p));
        tree.dirs.retain(|k| !k.starts_with(&p) && *k != key);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        self.load_if_may_hold(&key)?;
        let mut tree = self.tree();
        if tree.files.contains_key(&key) {
            return Err(Error::io(
                "create directory",
                path,
                std::io::Error::new(ErrorKind::AlreadyExists, "a file"),
            ));
        }
        if !key.is_empty() {
            tree.dirs.insert(key);
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let Ok(key) = self.key_of(path) else {
            return false;
        };
        self.found_or_loaded(&key, |tree| {
            tree.files.contains_key(&key) || tree.is_dir(&key)
        })
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.key_of(path)
            .is_ok_and(|k| self.found_or_loaded(&k, |tree| tree.is_dir(&k)))
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<LockGuard> {
        // Only in this process: across processes, the conditional commit is what keeps two
        // writers apart (the second gets `Conflict`).
        let mut held = held_locks();
        if !held.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
                holder: Some(std::process::id()),
            });
        }
        Ok(Box::new(HeldLock(path.to_path_buf())))
    }

    fn concurrent_reads(&self) -> Option<usize> {
        Some(self.backend.read_tuning().0.concurrency)
    }

    fn read_part_size(&self) -> Option<u64> {
        Some(self.backend.read_tuning().0.part_size)
    }

    fn file_bytes(&self) -> Option<u64> {
        Some(OBJECT_FILE_BYTES)
    }

    fn publish(&self, root: &Path) -> Result<()> {
        self.publish_with_front(root, &|_| None)
    }

    fn publish_with_front(&self, root: &Path, front: &FrontRanges<'_>) -> Result<()> {
        if root == self.backend.root.as_path() {
            self.publish_root(front)
        } else {
            Ok(())
        }
    }

    fn commits_by_publish(&self) -> bool {
        true
    }

    fn discard_unpublished(&self, root: &Path) {
        if root == self.backend.root.as_path() {
            self.reset_tree();
            self.forget_draft();
        }
    }

    fn shared_dir(&self, root: &Path, id: &str) -> Result<Option<Arc<dyn SharedDir>>> {
        // A staged create builds at `<root>.tmp-build`, which is never uploaded: the
        // session lies under the dataset's own prefix, where its state will name the files.
        let _ = root;
        let rel = format!("{STAGED_PREFIX}/{id}");
        if !plain_name(id) {
            return Err(Error::InvalidArgument(format!(
                "{id:?} is not a plain session name"
            )));
        }
        Ok(Some(Arc::new(SharedPrefix {
            backend: self.backend.below(&rel),
        })))
    }

    fn adopt(
        &self,
        dir: &dyn SharedDir,
        name: &str,
        size: u64,
        blocks: Option<&str>,
        path: &Path,
    ) -> Result<()> {
        let location = dir.location();
        let rel_dir = location
            .strip_prefix(&self.backend.root)
            .ok()
            .and_then(Path::to_str)
            .filter(|r| r.starts_with(STAGED_PREFIX))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{}: not a shared directory of {}",
                    location.display(),
                    self.backend.root.display()
                ))
            })?;
        if !plain_name(name) {
            return Err(Error::InvalidArgument(format!(
                "{name:?} is not a plain file name"
            )));
        }
        let key: Arc<str> = Arc::from(format!("{rel_dir}/{name}").as_str());
        let pieces = if size > 0 {
            vec![Piece {
                key,
                size,
                at: 0,
                len: size,
            }]
        } else {
            Vec::new()
        };
        let node = Node::new(Data::Remote {
            pieces,
            len: size,
            head: None,
            front: None,
        });
        // The front the state keeps for it (as for a file this handle uploads): read now,
        // through the object, so that readers of the commit open it with no request.
        if let Some(front) = self.read_front(path, &node, &blz_format::blpk::front_ranges)? {
            let set = |copy: Arc<FrontCopy>| {
                if let Data::Remote { front: f, .. } = &mut *lock_data(&node) {
                    *f = Some(copy);
                }
            };
            set(FrontCopy::new(front.clone()));
            if let Some(b) = blocks {
                if let Some(copy) = self.worker_index(dir, b, path, &node, front, size)? {
                    set(copy);
                }
            }
        }
        let key = self.key_of(path)?;
        // It replaces a file a manifest may hold: the commit must see that file.
        self.load_if_may_hold(&key)?;
        let mut tree = self.tree();
        if tree.is_dir(&key) {
            return Err(Error::io(
                "create",
                path,
                std::io::Error::new(ErrorKind::IsADirectory, "a directory"),
            ));
        }
        tree.files.insert(key, node);
        Ok(())
    }
}

/// Whether `rel` names an upload of a dataset's first commit (`<file path>.1-<tag>`, §2),
/// which a create killed before its state write leaves behind.
fn first_commit_upload(rel: &str) -> bool {
    rel.rsplit_once(".1-").is_some_and(|(path, tag)| {
        !path.is_empty()
            && tag.len() == 16
            && tag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Whether `key` (a file path or object key relative to the dataset's prefix) is plain:
/// each of its components a [`plain_name`].
fn plain_key(key: &str) -> bool {
    key.split('/').all(plain_name)
}

/// Whether `name` is one plain component of a key: not empty, `.` or `..`, no `/`.
fn plain_name(name: &str) -> bool {
    !(name.is_empty() || name.contains('/') || name == "." || name == "..")
}

/// The key prefix, below a dataset's, of the sessions of staged writes on it
/// ([`Storage::shared_dir`]): `staged/<id>/`.
pub const STAGED_PREFIX: &str = "staged";

/// A shared directory on an object store: the objects below a key prefix, each file one
/// object ([`SharedDir`]). A staged write's session is `PREFIX/staged/<id>/`.
pub struct SharedPrefix {
    backend: Backend,
}

impl std::fmt::Debug for SharedPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPrefix")
            .field("location", &self.backend.root)
            .finish_non_exhaustive()
    }
}

impl SharedPrefix {
    /// The shared directory `s3://bucket/key`, with a client configured from the
    /// environment as [`ObjectStorage::open_url`]'s (no request is made).
    ///
    /// # Errors
    /// As [`parse_s3_url`] and [`s3_store`].
    pub fn open_url(url: &str) -> Result<SharedPrefix> {
        let (backend, _) = Backend::for_url(url)?;
        Ok(SharedPrefix { backend })
    }

    fn check_name(&self, name: &str) -> Result<()> {
        if !plain_name(name) {
            return Err(Error::InvalidArgument(format!(
                "{}: {name:?} is not a plain file name",
                self.backend.root.display()
            )));
        }
        Ok(())
    }
}

impl SharedDir for SharedPrefix {
    fn location(&self) -> &Path {
        &self.backend.root
    }

    fn put(&self, name: &str, bytes: Bytes) -> Result<()> {
        self.check_name(name)?;
        let rt = runtime()?;
        let path = self.backend.root.join(name);
        rt.block_on(self.backend.upload(name, &path, bytes))
    }

    fn get(&self, name: &str, limit: u64) -> Result<Option<Bytes>> {
        self.check_name(name)?;
        let rt = runtime()?;
        let b = &self.backend;
        let path = b.root.join(name);
        b.note("GET", name, format_args!(""));
        let started = std::time::Instant::now();
        let got = rt.block_on(async {
            let r = b
                .store
                .get_opts(&b.key(name), GetOptions::default())
                .await?;
            if r.meta.size > limit {
                return Ok(None);
            }
            Ok::<_, object_store::Error>(Some(r.bytes().await?))
        });
        match got {
            Ok(Some(bytes)) => Ok(Some(bytes)),
            Ok(None) => Err(Error::metadata(
                &path,
                format!("larger than the {limit} bytes it may be"),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(b.error("read", &path, Client::Read, started, e)),
        }
    }

    fn list(&self) -> Result<Vec<(String, u64)>> {
        let rt = runtime()?;
        let b = &self.backend;
        b.note("LIST", "", format_args!(""));
        let started = std::time::Instant::now();
        let prefix = OPath::from(b.prefix.as_str());
        let listed: Vec<object_store::ObjectMeta> = rt
            .block_on(b.store.list(Some(&prefix)).try_collect())
            .map_err(|e| b.error("list", &b.root, Client::Read, started, e))?;
        let skip = b.prefix.len() + 1;
        let mut out: Vec<(String, u64)> = listed
            .iter()
            .filter_map(|m| {
                let rel = m.location.as_ref().get(skip..)?;
                (!rel.contains('/')).then(|| (rel.to_string(), m.size))
            })
            .collect();
        out.sort();
        Ok(out)
    }

    fn remove(&self, names: &[String]) -> Result<()> {
        self.backend.delete_all(names)
    }
}

/// What [`collect_garbage`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    /// Objects deleted: retired ones and orphans.
    pub deleted: Vec<String>,
    /// Objects left because they are younger than the grace period.
    pub kept: usize,
}

/// The key prefix (below the dataset's prefix) of the probe objects [`collect_garbage`]
/// writes to read the store's clock: `gc-clock.<tag>`, `tag` 16 hexadecimal digits.
pub const CLOCK_PROBE: &str = "gc-clock.";

/// Removes the objects of the dataset at `storage`'s root that its current state no longer
/// uses: retired objects retired more than `grace` ago, and orphans (objects no state names:
/// uploads of a writer that lost a race or was killed) last modified more than `grace` ago.
/// Every time compared is the store's own (objects' Last-Modified; "now" is the
/// Last-Modified of a probe object it writes, [`CLOCK_PROBE`], and deletes), so no writer's
/// or collector's clock can make it remove an object too early. Then records the pruned
/// retired list with a conditional write. `grace` must exceed the longest time a reader
/// keeps reading a state after a newer one is committed, and the longest write (from its
/// first upload to its commit); see `spec/object-store.md` §6.
///
/// # Errors
/// I/O errors from the store; [`Error::Conflict`] when a writer committed meanwhile (what was
/// deleted was unused either way; run it again).
pub fn collect_garbage(storage: &ObjectStorage, grace: Duration) -> Result<Collected> {
    let rt = runtime()?;
    let backend = &storage.backend;
    // Every object of every file is live: the manifests' files too.
    storage.load_pending()?;
    let (state, version, superseded) = {
        let c = storage.committed_lock();
        (c.state.clone(), c.version.clone(), c.superseded)
    };
    // Every object an entry names stays, whole or for one extent of it.
    let used: HashSet<String> = state
        .iter()
        .flat_map(|s| {
            let manifests = s.manifests.iter().map(|m| m.key.as_str());
            s.files.values().flat_map(StateFile::keys).chain(manifests)
        })
        .map(str::to_string)
        .collect();
    // The store's "now": the Last-Modified of an object written now, as the listing shows.
    let probe = format!("{CLOCK_PROBE}{:016x}", rand::random::<u64>());
    backend.note("PUT", &probe, format_args!(""));
    let started = std::time::Instant::now();
    rt.block_on(
        backend
            .client(Client::Write)
            .put(&backend.key(&probe), PutPayload::default()),
    )
    .map_err(|e| {
        backend.error(
            "write",
            &backend.root.join(&probe),
            Client::Write,
            started,
            e,
        )
    })?;
    let prefix = OPath::from(backend.prefix.as_str());
    backend.note("LIST", "", format_args!(""));
    let started = std::time::Instant::now();
    let listed: Vec<object_store::ObjectMeta> = rt
        .block_on(backend.store.list(Some(&prefix)).try_collect())
        .map_err(|e| backend.error("list", &backend.root, Client::Read, started, e))?;
    let skip = backend.prefix.len() + 1;
    let rel_of = |m: &object_store::ObjectMeta| -> Option<String> {
        m.location.as_ref().get(skip..).map(str::to_string)
    };
    let stamp = |m: &object_store::ObjectMeta| unix_secs(SystemTime::from(m.last_modified));
    // Without the probe in the listing, the latest time listed is a "now" no later than
    // the true one (so nothing goes early).
    let now = listed
        .iter()
        .find(|m| rel_of(m).as_deref() == Some(probe.as_str()))
        .or_else(|| listed.iter().max_by_key(|m| m.last_modified))
        .map_or(0, stamp);
    // An entry not yet stamped with the time its retiring state was stored was retired by
    // the current state or before it: by the time the store stored the current state.
    let state_stored = listed
        .iter()
        .find(|m| rel_of(m).as_deref() == Some(STATE_KEY))
        .map_or(now, stamp);
    let retired: BTreeMap<String, u64> = state
        .iter()
        .flat_map(|s| &s.retired)
        .map(|r| (r.key.clone(), r.stored_by.unwrap_or(state_stored)))
        .collect();
    // With no state (a create that never committed: its client was killed), only what blz
    // names so is collected: sessions of staged writes, clock probes and a first commit's
    // uploads. Anything else there is not blz's to remove.
    let blz_own = |rel: &str| {
        state.is_some()
            || rel.starts_with(&format!("{STAGED_PREFIX}/"))
            || rel.starts_with(CLOCK_PROBE)
            || first_commit_upload(rel)
    };
    if state.is_none()
        && !listed
            .iter()
            .filter_map(&rel_of)
            .any(|r| blz_own(&r) && r != probe)
    {
        let _ = rt.block_on(backend.client(Client::Write).delete(&backend.key(&probe)));
        return Err(Error::InvalidArgument(format!(
            "{}: no dataset there",
            backend.root.display()
        )));
    }
    let old_enough = |t: u64| t.saturating_add(grace.as_secs()) <= now;
    let mut doomed = Vec::new();
    let mut kept = 0;
    for m in &listed {
        let Some(rel) = rel_of(m) else {
            continue;
        };
        if rel == STATE_KEY || rel == probe || used.contains(&rel) || !blz_own(&rel) {
            continue;
        }
        let t = retired.get(&rel).copied().unwrap_or_else(|| stamp(m));
        if old_enough(t) {
            doomed.push(rel);
        } else {
            kept += 1;
        }
    }
    backend.delete_all(doomed.iter().chain(std::iter::once(&probe)))?;
    let Some(mut state) = state else {
        return Ok(Collected {
            deleted: doomed,
            kept,
        });
    };
    let gone: HashSet<&str> = doomed.iter().map(String::as_str).collect();
    let before = state.retired.len();
    state.retired.retain(|r| !gone.contains(r.key.as_str()));
    if state.retired.len() != before {
        if superseded {
            return Err(Error::Conflict {
                path: backend.root.clone(),
            });
        }
        state.stamp_write();
        let w = storage.write_state(&mut state, version.as_ref())?;
        *storage.committed_lock() = Committed::written(state, w);
    }
    Ok(Collected {
        deleted: doomed,
        kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bodies go up unsigned to an HTTPS endpoint and signed to a plain HTTP one, unless
    /// `AWS_UNSIGNED_PAYLOAD` says otherwise (the builder's own reading of it stands).
    #[test]
    fn bodies_are_signed_only_over_plain_http() {
        use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as K};
        let unsigned = |b: AmazonS3Builder| b.get_config_value(&K::UnsignedPayload);
        let none = |_: &str| false;
        let base = AmazonS3Builder::new();
        for (endpoint, want) in [
            ("https://s3.eu-west-1.amazonaws.com", "true"),
            ("HTTPS://minio.example:9000", "true"),
            ("http://127.0.0.1:5000", "false"),
            ("localhost:9000", "false"),
        ] {
            let got = unsigned(sign_payloads(base.clone(), endpoint, none));
            assert_eq!(got.as_deref(), Some(want), "{endpoint}");
        }
        // Set in the environment: what the builder read is kept, either way.
        let set = |v: &str| v == UNSIGNED_PAYLOAD_VAR;
        let signed = base.clone().with_unsigned_payload(false);
        let got = unsigned(sign_payloads(signed, "https://s3.amazonaws.com", set));
        assert_eq!(got.as_deref(), Some("false"));
        let chosen = base.with_unsigned_payload(true);
        let got = unsigned(sign_payloads(chosen, "http://127.0.0.1:5000", set));
        assert_eq!(got.as_deref(), Some("true"));
    }

    /// Writes to a file being written go to its one spool file: none is made per write.
    #[test]
    fn a_file_written_many_times_has_one_spool_file() {
        let store = Arc::new(object_store::memory::InMemory::new());
        let s = ObjectStorage::in_memory(&store, "spools/x.blz").unwrap();
        let path = s.root().join("data/a.bin");
        let f = s.open(&path, OpenMode::Create).unwrap();
        let before = SPOOL_FILES.load(Ordering::Relaxed);
        for i in 0..50u64 {
            f.write_at(i * 8, &i.to_le_bytes()).unwrap();
            f.set_len(i * 8 + 8).unwrap();
        }
        let mut buf = [0u8; 8];
        f.read_at(49 * 8, &mut buf).unwrap();
        assert_eq!(u64::from_le_bytes(buf), 49);
        // Other tests of this process make spools meanwhile: a spool per write would show
        // as 100 or more.
        assert!(SPOOL_FILES.load(Ordering::Relaxed) - before < 20);
    }

    /// Bytes handed out mapped (an upload's) stay as they were while the file is written
    /// again and shrunk; the file itself reads its new bytes.
    #[test]
    fn mapped_spool_bytes_outlive_later_writes() {
        let path = Path::new("memory://spools/y.blz/data/b.bin");
        let mut sp = Spool::new(path).unwrap();
        let old: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        sp.file_to_write(path)
            .unwrap()
            .write_all_at(&old, 0)
            .unwrap();
        sp.len = old.len() as u64;
        add_range(&mut sp.written, 0..sp.len);
        let store = Arc::new(object_store::memory::InMemory::new());
        let s = ObjectStorage::in_memory(&store, "spools/y.blz").unwrap();
        let mapped = sp
            .bytes_of(&s.backend, std::slice::from_ref(&(0..sp.len)), path)
            .unwrap();
        let tail = sp
            .bytes_of(&s.backend, std::slice::from_ref(&(90_000..100_000)), path)
            .unwrap();
        assert!(sp.mapped);
        assert_eq!(&mapped[..], &old[..]);
        sp.file_to_write(path)
            .unwrap()
            .write_all_at(&[7u8; 1000], 0)
            .unwrap();
        assert!(!sp.mapped);
        sp.file_to_write(path).unwrap().set_len(10).unwrap();
        sp.len = 10;
        clip_ranges(&mut sp.written, 10);
        assert_eq!(&mapped[..], &old[..]);
        assert_eq!(&tail[..], &old[90_000..]);
        let mut now = [0u8; 10];
        sp.read_at(&s.backend, 0, &mut now, path).unwrap();
        assert_eq!(now, [7u8; 10]);
    }

    /// A second open of a bucket under the same configuration takes the clients made for
    /// the first (no client is built per open); another bucket gets its own.
    #[test]
    fn clients_are_made_once_per_bucket_and_configuration() {
        let a = s3_clients("blz-kept-a").unwrap();
        let again = s3_clients("blz-kept-a").unwrap();
        let b = s3_clients("blz-kept-b").unwrap();
        assert!(Arc::ptr_eq(&a.read, &again.read));
        assert!(Arc::ptr_eq(&a.write, &again.write));
        assert!(!Arc::ptr_eq(&a.read, &b.read));
        assert!(!Arc::ptr_eq(&a.read, &a.write));
    }

    #[test]
    fn base64_round_trips_and_matches_rfc_4648() {
        // RFC 4648 §10's test vectors.
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), coded);
            assert_eq!(base64_decode(coded).unwrap(), plain.as_bytes());
        }
        let all: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        assert_eq!(base64_decode(&base64_encode(&all)).unwrap(), all);
        for bad in ["Zg=", "Z===", "Zg==Zg==", "Zm9*", "Zg=a"] {
            assert!(base64_decode(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn a_front_answers_reads_inside_its_ranges_and_checks_itself() {
        let file: Vec<u8> = (0..5000u32).map(|i| (i % 253) as u8).collect();
        let ranges = [0..100u64, 2000..2500];
        let mut bytes = file[0..100].to_vec();
        bytes.extend_from_slice(&file[2000..2500]);
        let front = Front::new(&ranges, &bytes).unwrap();
        assert_eq!(front.ranges, vec![[0, 100], [2000, 500]]);
        assert_eq!(front.fault(5000), None);
        assert!(front.fault(2499).is_some(), "a range past the end");
        let copy = FrontCopy::new(front.clone());
        assert_eq!(copy.find(10, 20), Some(10));
        assert_eq!(copy.find(2100, 2500), Some(200));
        assert_eq!(copy.find(90, 110), None);
        assert_eq!(copy.find(2400, 2501), None);
        let b = copy.bytes().unwrap();
        assert_eq!(&b[200..600], &file[2100..2500]);
        // Ranges out of order, overlapping, empty or too large are refused.
        for r in [
            vec![[100, 10], [0, 10]],
            vec![[0, 10], [5, 10]],
            vec![[0, 0]],
            vec![[0, MAX_FRONT + 1]],
        ] {
            let f = Front {
                ranges: r.clone(),
                zlib: String::new(),
                blocks: None,
                blocks_object: None,
            };
            assert!(f.fault(u64::MAX / 2).is_some(), "{r:?}");
        }
        // An index both carried and in an object of its own is a fault.
        let both = Front {
            blocks: Some(String::new()),
            blocks_object: Some(ExtentObject {
                key: "data/x.blocks".into(),
                size: 1,
            }),
            ..front.clone()
        };
        assert!(both.fault(u64::MAX / 2).is_some());
        // A copy that decodes to another length than its ranges hold is an error.
        let short = FrontCopy::new(Front {
            ranges: vec![[0, 101]],
            zlib: front.zlib.clone(),
            blocks: None,
            blocks_object: None,
        });
        assert!(short.bytes().is_err());
        // A block index that is not base64, not zlib, or not records is an error; none is
        // no index.
        assert!(FrontCopy::new(front.clone())
            .block_index()
            .unwrap()
            .is_none());
        for bad in [
            "!!".to_string(),
            base64_encode(b"not zlib"),
            front.zlib.clone(),
        ] {
            let f = FrontCopy::new(Front {
                blocks: Some(bad.clone()),
                ..front.clone()
            });
            assert!(f.block_index().is_err(), "{bad}");
        }
    }

    /// A state past the bound a reader reads sheds files' fronts, the last files' first,
    /// until it fits; one that does not fit without them is refused.
    #[test]
    fn a_state_too_long_sheds_fronts_then_is_refused() {
        let bytes: Vec<u8> = (0..4000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let front = Front::new(std::slice::from_ref(&(0..4000)), &bytes).unwrap();
        let files: BTreeMap<String, StateFile> = (0..40)
            .map(|i| {
                (
                    format!("data/__{i:02}__.bin"),
                    StateFile::Object {
                        key: format!("data/__{i:02}__.bin.1-0000000000000001"),
                        len: 1 << 20,
                        front: Some(front.clone()),
                    },
                )
            })
            .collect();
        let state = State::first(files, Vec::new());
        let path = Path::new("s3://b/x.blz/meta/state");
        let whole = serde_json::to_vec(&state).unwrap().len() as u64;
        let mut same = state.clone();
        assert_eq!(
            state_bytes(&mut same, whole, path).unwrap().len() as u64,
            whole
        );
        assert_eq!(same, state, "a state that fits is left alone");
        let fronted = |s: &State| -> Vec<bool> {
            s.files
                .values()
                .map(|f| matches!(f, StateFile::Object { front: Some(_), .. }))
                .collect()
        };
        for max in [whole - 1, whole * 2 / 3, whole / 4] {
            let mut cut = state.clone();
            let b = state_bytes(&mut cut, max, path).unwrap();
            assert!(b.len() as u64 <= max, "{} over {max}", b.len());
            let back: State = serde_json::from_slice(&b).unwrap();
            assert_eq!(back, cut);
            let kept = fronted(&cut);
            let n = kept.iter().filter(|&&k| k).count();
            assert!(n < 40, "{max}: no front left out");
            assert!(
                kept[..n].iter().all(|&k| k),
                "{max}: the last files' go first"
            );
            // Not more left out than needed: one front more would not have fit.
            if n < 40 {
                let mut more = cut.clone();
                if let Some(StateFile::Object { front, .. }) = more.files.values_mut().nth(n) {
                    *front = Some(Front::new(std::slice::from_ref(&(0..4000)), &bytes).unwrap());
                }
                let longer = serde_json::to_vec(&more).unwrap().len() as u64;
                assert!(longer > max, "{max}: front {n} was left out though it fit");
            }
        }
        let bare = {
            let mut s = state.clone();
            for f in s.files.values_mut() {
                if let StateFile::Object { front, .. } = f {
                    *front = None;
                }
            }
            serde_json::to_vec(&s).unwrap().len() as u64
        };
        let mut refused = state.clone();
        match state_bytes(&mut refused, bare - 1, path) {
            Err(Error::InvalidArgument(m)) => {
                assert!(
                    m.contains("s3://b/x.blz/meta/state") && m.contains("too many files"),
                    "{m}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
