//! The JSON files under a dataset's `meta/` directory: `sizes` (the commit point: shape and
//! byte counts), `storage` (dtype, chunking, compression: fixed at creation) and `attributes`
//! (the user's JSON).

use crate::blosc::{Codec, Filter};
use crate::blpk::Checksum;
use crate::dtype::{DType, Endianness};
use crate::error::{Error, Result};
use crate::storage::{read_small_file, write_file_atomic, Storage};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Largest meta file blz reads.
pub(crate) const MAX_META_FILE: u64 = 64 * 1024 * 1024;
/// Value of the `format` key in `meta/storage`.
pub(crate) const FORMAT_NAME: &str = "blz";
/// Version of the dataset layout this crate writes.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// `meta/sizes`: the committed shape and byte counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sizes {
    /// Extent of each axis.
    pub shape: Vec<u64>,
    /// Uncompressed bytes of the elements inside `shape`.
    pub nbytes: u64,
    /// Bytes of the stored chunks (compressed chunk plus digest) of the dataset.
    pub cbytes: u64,
    /// Number of rows in each column of a table (absent for plain arrays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nrows: Option<u64>,
    /// Per-column byte counts of a table, by column path (absent for plain arrays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<std::collections::BTreeMap<String, ColumnSizes>>,
    /// Commits of data so far: every transaction that changes sizes or data adds one, so a
    /// reader can tell that a writer committed since it opened (0 in datasets written
    /// before the key existed).
    #[serde(default)]
    pub generation: u64,
    /// The generation of the last commit that changed or removed elements already there (a
    /// modify, a shrink, a column change), as opposed to adding elements (an append, a
    /// grow): a reader whose commit is at or after it reads the same values for every
    /// element it knows. Absent in datasets written before the key existed (every commit
    /// then counts as a rewrite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewritten: Option<u64>,
    /// The generation up to which every commit kept the per-chunk statistics of the
    /// superchunk files current (`spec/dataset.md` §14): they are trusted only while it
    /// equals `generation`. A writer that predates statistics drops the key (so its changes,
    /// which do not update them, make them unknown); absent in datasets created before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<u64>,
}

impl Sizes {
    /// Whether the superchunk files' statistics are current (see [`Sizes::stats`]).
    pub fn stats_current(&self) -> bool {
        self.stats == Some(self.generation)
    }

    /// The `stats` value of the commit after this one: its generation while statistics are
    /// current, none once they are not (a writer that predates them committed).
    pub(crate) fn next_stats(&self) -> Option<u64> {
        self.stats_current().then_some(self.generation + 1)
    }

    /// The `rewritten` value of the commit after this one: that commit's generation when it
    /// `rewrites` elements, else this one's (this one's generation when it has none).
    pub(crate) fn next_rewritten(&self, rewrites: bool) -> Option<u64> {
        Some(if rewrites {
            self.generation + 1
        } else {
            self.rewritten.unwrap_or(self.generation)
        })
    }
}

/// `r`, a read of the dataset at `root` made through a handle that opened commit `seen`;
/// an error the read met becomes [`Error::Changed`] when a writer has committed since (the
/// read then met what the commit removed or rewrote, not damage), or a `NotFound` I/O
/// error naming the dataset when the dataset itself is gone (its directory removed under
/// the handle: no reopen would find it).
pub(crate) fn unless_changed<T>(
    storage: &dyn Storage,
    root: &Path,
    seen: u64,
    r: Result<T>,
) -> Result<T> {
    match r {
        Err(e) if e.may_be_stale() => Err(stale_or_gone(storage, root, seen, e)),
        r => r,
    }
}

/// The stamp ([`Storage::stamp`]) of `meta/sizes` of the dataset at `root`, taken by a
/// read-only handle just before it reads `meta/sizes`: every commit replaces that file, so
/// a read that finds the same stamp after it ends (and no journal being applied) read one
/// commit whole ([`whole_unless_committed`]).
pub(crate) fn sizes_stamp(storage: &dyn Storage, root: &Path) -> Option<[u64; 4]> {
    storage.stamp(&MetaPaths::new(root).sizes())
}

/// What a read-only handle knows of the commit it shows, to tell whether a read met
/// another commit ([`whole_unless_committed`]).
#[derive(Debug, Default)]
pub(crate) struct ReadSnapshot {
    /// The stamp of `meta/sizes` last found to show this commit's values (taken at open
    /// before `meta/sizes` was read); `None`: nothing to check (a writing handle, one opened
    /// through a journal view, a backend without stamps).
    stamp: std::sync::Mutex<Option<[u64; 4]>>,
}

impl ReadSnapshot {
    /// A snapshot of the commit whose `meta/sizes` had stamp `stamp`.
    pub(crate) fn new(stamp: Option<[u64; 4]>) -> ReadSnapshot {
        ReadSnapshot {
            stamp: std::sync::Mutex::new(stamp),
        }
    }

    fn get(&self) -> Option<[u64; 4]> {
        self.stamp.lock().map(|s| *s).unwrap_or(None)
    }

    /// Replaces the stamp (after a refresh found the same commit), if there is one to keep.
    pub(crate) fn renew(&mut self, stamp: Option<[u64; 4]>) {
        if let Ok(s) = self.stamp.get_mut() {
            if s.is_some() {
                *s = stamp;
            }
        }
    }
}

/// `r`, a successful read through a read-only handle showing commit `generation` of the
/// dataset with identity `id` ([`ReadSnapshot`]), becomes [`Error::Changed`] when another
/// commit may have changed values it read: a journal is being applied (it rewrites
/// committed bytes in place), or `meta/sizes` was replaced by a commit that changed or
/// removed elements (its `rewritten` is past `generation`). Commits that only added
/// elements since (appends, grows) leave every element the handle knows as it was, so its
/// reads stand. Two `stat`s on a local filesystem while nothing commits; `meta/sizes` is
/// read once per commit otherwise. The caller refreshes and reads again after `Changed`.
pub(crate) fn whole_unless_committed<T>(
    storage: &dyn Storage,
    root: &Path,
    snap: &ReadSnapshot,
    generation: u64,
    id: &Option<String>,
    r: Result<T>,
) -> Result<T> {
    let Some(seen) = snap.get().filter(|_| r.is_ok()) else {
        return r;
    };
    let stamp = sizes_stamp(storage, root);
    let pending = crate::txn::pending(storage, root);
    if stamp == Some(seen) && !pending {
        return r;
    }
    // The journal is looked for again after `meta/sizes` is read: a commit begun meanwhile.
    let only_added = !pending
        && read_json::<Sizes>(storage, &MetaPaths::new(root).sizes()).is_ok_and(|s| {
            s.rewritten.is_some_and(|w| w <= generation) && s.generation >= generation
        })
        && identity_now(storage, root) == *id
        && !crate::txn::pending(storage, root);
    if only_added {
        if let Ok(mut s) = snap.stamp.lock() {
            *s = stamp;
        }
        return r;
    }
    Err(if removed(storage, root) {
        gone(root)
    } else {
        Error::Changed {
            path: root.to_path_buf(),
        }
    })
}

/// The error for a read through a handle whose dataset was removed.
fn gone(root: &Path) -> Error {
    Error::io(
        "read",
        root,
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the dataset was removed while this handle had it open",
        ),
    )
}

/// What a read error that may be stale is, given the dataset as it is now: the error
/// itself when no writer committed since `seen`, `NotFound` when the dataset is gone,
/// [`Error::Changed`] otherwise.
fn stale_or_gone(storage: &dyn Storage, root: &Path, seen: u64, e: Error) -> Error {
    if generation_now(storage, root) == Some(seen) {
        return e;
    }
    if removed(storage, root) {
        return gone(root);
    }
    Error::Changed {
        path: root.to_path_buf(),
    }
}

/// True when nothing is left of the dataset at `root`: no `meta/storage` (written at
/// creation, never replaced but by a create with overwrite, which swaps whole directories).
fn removed(storage: &dyn Storage, root: &Path) -> bool {
    !storage.exists(&MetaPaths::new(root).storage())
}

/// As [`unless_changed`] for the problems a verification found: when a writer committed
/// since `seen`, they are replaced by one [`Error::Changed`] (verify the new state), or by
/// one `NotFound` when the dataset is gone.
pub(crate) fn verified_unless_changed(
    storage: &dyn Storage,
    root: &Path,
    seen: u64,
    errors: Vec<Error>,
) -> Vec<Error> {
    match errors.iter().position(Error::may_be_stale) {
        Some(i) if generation_now(storage, root) != Some(seen) => {
            let first = errors.into_iter().nth(i);
            first
                .map(|e| vec![stale_or_gone(storage, root, seen, e)])
                .unwrap_or_default()
        }
        _ => errors,
    }
}

/// The commit generation of the dataset at `root` now: its `meta/sizes` generation, or
/// `None` while a committed journal is still to be applied (a writer is at work) or when
/// the file cannot be read.
pub(crate) fn generation_now(storage: &dyn Storage, root: &Path) -> Option<u64> {
    if crate::txn::pending(storage, root) {
        return None;
    }
    read_json::<Sizes>(storage, &MetaPaths::new(root).sizes())
        .ok()
        .map(|s| s.generation)
}

/// Byte counts of one table column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnSizes {
    /// Uncompressed bytes: rows times itemsize for fixed-size columns; for variable-length
    /// columns, the uncompressed chunk payloads (items plus their 4-byte lengths).
    pub nbytes: u64,
    /// Stored bytes: compressed chunks plus digests.
    pub cbytes: u64,
    /// The rows of a column whose count is not the table's: a dictionary-encoded column's
    /// dictionary (`spec/table.md` §3.6). Absent for every other column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
}

/// Compression settings of a dataset (or of one column).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compression {
    /// The Blosc codec.
    pub codec: Codec,
    /// Level 0-9.
    pub clevel: u8,
    /// Filters in the order they are applied: `truncate` (keep `mantissa_bits` significant
    /// mantissa bits of floats; lossy) and one of `shuffle`, `bitshuffle` (Blosc's).
    pub filters: Vec<FilterName>,
    /// Mantissa bits kept by `truncate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mantissa_bits: Option<u8>,
    /// Block size in bytes forced on c-blosc; 0 lets blz choose per chunk
    /// ([`blosc::compress_into`](crate::blosc::compress_into)).
    #[serde(default)]
    pub blocksize: usize,
}

/// A filter name in [`Compression::filters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterName {
    /// Keep only `mantissa_bits` significant mantissa bits (floats only).
    Truncate,
    /// Blosc byte shuffle.
    Shuffle,
    /// Blosc bit shuffle.
    Bitshuffle,
}

impl Default for Compression {
    fn default() -> Self {
        Compression {
            codec: Codec::Lz4,
            clevel: 5,
            filters: vec![FilterName::Shuffle],
            mantissa_bits: None,
            blocksize: 0,
        }
    }
}

impl Compression {
    /// The Blosc shuffle filter the settings name.
    pub(crate) fn blosc_filter(&self) -> Filter {
        if self.filters.contains(&FilterName::Bitshuffle) {
            Filter::Bitshuffle
        } else if self.filters.contains(&FilterName::Shuffle) {
            Filter::Shuffle
        } else {
            Filter::NoShuffle
        }
    }

    /// Checks the settings for `dtype`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad level, both shuffles, truncation of a non-float,
    /// or a mantissa width the type does not have.
    pub fn validate(&self, dtype: DType) -> Result<()> {
        if self.clevel > 9 {
            return Err(Error::InvalidArgument(format!(
                "clevel {} out of range 0-9",
                self.clevel
            )));
        }
        if self.filters.contains(&FilterName::Shuffle)
            && self.filters.contains(&FilterName::Bitshuffle)
        {
            return Err(Error::InvalidArgument(
                "shuffle and bitshuffle cannot both be applied".into(),
            ));
        }
        let trunc = self.filters.contains(&FilterName::Truncate);
        match (trunc, self.mantissa_bits) {
            (true, None) => {
                return Err(Error::InvalidArgument(
                    "the truncate filter needs mantissa_bits".into(),
                ))
            }
            (false, Some(_)) => {
                return Err(Error::InvalidArgument(
                    "mantissa_bits given without the truncate filter".into(),
                ))
            }
            (true, Some(bits)) => {
                let max = match dtype {
                    DType::F32 | DType::C64 => 23,
                    DType::F64 | DType::C128 => 52,
                    other => {
                        return Err(Error::InvalidArgument(format!(
                            "the truncate filter applies to floats, not {other}"
                        )))
                    }
                };
                if bits == 0 || bits > max {
                    return Err(Error::InvalidArgument(format!(
                        "mantissa_bits {bits} out of range 1..={max} for {dtype}"
                    )));
                }
            }
            (false, None) => {}
        }
        Ok(())
    }
}

/// `meta/storage` of an N-d array dataset: everything fixed at creation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrayStorage {
    /// Always `"blz"`.
    pub format: String,
    /// Layout version (1).
    pub version: u32,
    /// Element type.
    pub dtype: DType,
    /// Byte order of the stored elements.
    pub endianness: Endianness,
    /// Always `"C"`: the last axis varies fastest, inside chunks and in the chunk grid.
    pub order: String,
    /// Extent of a chunk on each axis.
    pub chunkshape: Vec<u64>,
    /// Chunks per superchunk file.
    pub superchunksize: u64,
    /// Compression settings.
    pub compression: Compression,
    /// Digest stored after each chunk.
    #[serde(with = "checksum_name")]
    pub checksum: Checksum,
    /// Bytes reserved after each chunk for in-place rewrites.
    pub slack: u32,
    /// Fill value for padding and growth, as JSON.
    pub dflt: serde_json::Value,
    /// Number of elements along axis 0 the user expected when creating (a sizing hint).
    #[serde(default)]
    pub expectedlen: u64,
    /// The dataset's identity (32 hex digits, random at creation), which every superchunk
    /// file records so that a file from elsewhere is not read as this dataset's; absent in
    /// datasets created before blz bound files to their dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// The identity (`id` of `meta/storage`) of the dataset at `root` now, `None` when it has
/// none or the file cannot be read: a dataset replaced by a new create has another.
pub(crate) fn identity_now(storage: &dyn Storage, root: &Path) -> Option<String> {
    let v: serde_json::Value = read_json(storage, &MetaPaths::new(root).storage()).ok()?;
    v.get("id")?.as_str().map(str::to_string)
}

/// A new random identity for a dataset or a table column: 32 hex digits.
pub(crate) fn new_id() -> String {
    use sha2::Digest;
    use std::hash::BuildHasher;
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = sha2::Sha256::new();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(
        COUNTER
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_le_bytes(),
    );
    // std's hasher keys are random per process.
    h.update(
        std::collections::hash_map::RandomState::new()
            .hash_one(nanos)
            .to_le_bytes(),
    );
    h.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Serializes a [`Checksum`] by its bloscpack name (`crc32`, `sha256`, ...) in meta documents.
pub(crate) mod checksum_name {
    use crate::blpk::Checksum;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(c: &Checksum, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Checksum, D::Error> {
        let s = String::deserialize(d)?;
        Checksum::from_name(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown checksum {s:?}")))
    }
}

/// Paths of a dataset's meta files.
#[derive(Debug, Clone)]
pub(crate) struct MetaPaths {
    /// `root/meta`.
    pub dir: PathBuf,
}

impl MetaPaths {
    /// The meta directory of the dataset at `root`.
    pub(crate) fn new(root: &Path) -> MetaPaths {
        MetaPaths {
            dir: root.join("meta"),
        }
    }
    /// `meta/sizes`.
    pub(crate) fn sizes(&self) -> PathBuf {
        self.dir.join("sizes")
    }
    /// `meta/storage`.
    pub(crate) fn storage(&self) -> PathBuf {
        self.dir.join("storage")
    }
    /// `meta/attributes`.
    pub(crate) fn attributes(&self) -> PathBuf {
        self.dir.join("attributes")
    }
    /// `meta/building`: present while the dataset is still being built (in its staging
    /// directory), which then refuses to open.
    pub(crate) fn building(&self) -> PathBuf {
        self.dir.join("building")
    }
}

/// The kind of a dataset, read once from its `meta/storage` (the `kind` key; an array's
/// document names none), or a bcolz directory read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// An N-d array ([`crate::Dataset`]).
    Array,
    /// A table of named columns ([`crate::Table`]).
    Table,
    /// A sorted layer dataset ([`crate::Layer`]).
    Layer,
    /// A bcolz carray, read in place ([`crate::bcolz::CarrayReader`]).
    BcolzCarray,
    /// A bcolz ctable, read in place ([`crate::bcolz::CtableReader`]).
    BcolzCtable,
}

impl Kind {
    /// The kind's name as `meta/storage` spells it (`"array"`, `"table"`, `"layer"`), or
    /// `"bcolz carray"` / `"bcolz ctable"`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Array => "array",
            Kind::Table => "table",
            Kind::Layer => "layer",
            Kind::BcolzCarray => "bcolz carray",
            Kind::BcolzCtable => "bcolz ctable",
        }
    }

    /// The kind a blz `meta/storage` document (at `path`) names.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a kind this version does not know (a newer blz wrote it);
    /// [`Error::NotBlz`] when the document is not blz's (no `"format": "blz"`);
    /// [`Error::InvalidMetadata`] when `kind` is not a string.
    pub(crate) fn of_storage_doc(raw: &serde_json::Value, path: &Path) -> Result<Kind> {
        if raw.get("format").and_then(|f| f.as_str()) != Some("blz") {
            return Err(Error::NotBlz {
                path: path.to_path_buf(),
                reason: "its format is not \"blz\"".into(),
            });
        }
        match raw.get("kind") {
            None => Ok(Kind::Array),
            Some(serde_json::Value::String(k)) => match k.as_str() {
                "table" => Ok(Kind::Table),
                "layer" => Ok(Kind::Layer),
                other => Err(Error::Unsupported {
                    path: path.to_path_buf(),
                    reason: format!("unknown dataset kind {other:?} (written by a newer blz?)"),
                }),
            },
            Some(_) => Err(Error::metadata(path, "kind must be a string")),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks that a `meta/storage` document (at `path`) is of kind `expected`.
///
/// # Errors
/// [`Error::InvalidMetadata`] naming both kinds and the API that opens the dataset.
pub(crate) fn check_dataset_kind(
    raw: &serde_json::Value,
    path: &Path,
    expected: Kind,
) -> Result<()> {
    let found = Kind::of_storage_doc(raw, path)?;
    if found == expected {
        return Ok(());
    }
    let a = |k: Kind| {
        if k.name().starts_with(['a', 'e', 'i', 'o', 'u']) {
            format!("an {k}")
        } else {
            format!("a {k}")
        }
    };
    Err(Error::metadata(
        path,
        format!(
            "this is {} dataset, not {} (open it with the {found} API, or blz::open)",
            a(found),
            a(expected)
        ),
    ))
}

/// The kind of the blz dataset at `root` on `storage`, read from its `meta/storage`; `None`
/// when there is no readable blz one (not a blz dataset; a bcolz carray's `meta/storage`
/// is not one). What opens a dataset reads the kind itself ([`crate::open`]); this is for
/// a caller that only asks.
pub fn dataset_kind(storage: &dyn Storage, root: &Path) -> Option<Kind> {
    let p = MetaPaths::new(root).storage();
    let raw = read_json::<serde_json::Value>(storage, &p).ok()?;
    Kind::of_storage_doc(&raw, &p).ok()
}

/// Reads and parses a JSON meta file. Public so that a client can read a `meta/` document
/// itself (the Python package tells a blz dataset's `meta/storage` from a bcolz one's).
///
/// # Errors
/// I/O errors, and [`Error::InvalidMetadata`] naming the file when it is not the expected
/// JSON.
pub fn read_json<T: serde::de::DeserializeOwned>(storage: &dyn Storage, path: &Path) -> Result<T> {
    let bytes = read_small_file(storage, path, MAX_META_FILE)?;
    serde_json::from_slice(&bytes).map_err(|e| Error::metadata(path, e.to_string()))
}

/// Serializes a meta document as pretty JSON with a final newline.
pub(crate) fn to_json_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(value).unwrap_or_default();
    v.push(b'\n');
    v
}

/// Writes a JSON meta file atomically.
///
/// # Errors
/// I/O errors.
pub(crate) fn write_json<T: Serialize>(
    storage: &dyn Storage,
    path: &Path,
    value: &T,
) -> Result<()> {
    write_file_atomic(storage, path, &to_json_bytes(value))
}

/// Parses JSON text given for a user attribute or a fill value, refusing integers that a
/// JSON number in blz cannot keep exactly: blz (like serde_json) holds an integer as a
/// 64-bit one, from -2^63 to 2^64-1; a larger literal would silently become the nearest
/// float. Such a value is better stored as a string.
///
/// # Errors
/// [`Error::InvalidArgument`] for text that is not JSON, and for an integer outside the
/// 64-bit range, naming where it sits (`key`, `key/3/inner`, or `the value` at the top).
pub fn parse_json_exact(text: &str) -> Result<serde_json::Value> {
    let v =
        serde_json::from_str(text).map_err(|e| Error::InvalidArgument(format!("not JSON: {e}")))?;
    if let Some((at, literal)) = inexact_integer(text) {
        return Err(Error::InvalidArgument(format!(
            "{at}: the integer {literal} does not fit 64 bits (JSON values in blz keep \
             integers exactly from -2^63 to 2^64-1); store it as a string"
        )));
    }
    Ok(v)
}

/// Where in the (valid) JSON `text` the first integer literal outside the 64-bit range sits,
/// with the literal.
fn inexact_integer(text: &str) -> Option<(String, String)> {
    enum Ctx {
        Object(Option<String>),
        Array(u64),
    }
    let at = |stack: &[Ctx]| {
        let parts: Vec<String> = stack
            .iter()
            .map(|c| match c {
                Ctx::Object(k) => k.clone().unwrap_or_default(),
                Ctx::Array(i) => i.to_string(),
            })
            .collect();
        if parts.is_empty() {
            "the value".to_string()
        } else {
            parts.join("/")
        }
    };
    let b = text.as_bytes();
    let mut stack: Vec<Ctx> = Vec::new();
    // In an object: the next string is a key.
    let mut want_key = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => {
                stack.push(Ctx::Object(None));
                want_key = true;
            }
            b'[' => stack.push(Ctx::Array(0)),
            b'}' | b']' => {
                stack.pop();
                want_key = false;
            }
            b':' => want_key = false,
            b',' => match stack.last_mut() {
                Some(Ctx::Array(n)) => *n += 1,
                Some(Ctx::Object(_)) => want_key = true,
                None => {}
            },
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                if want_key {
                    if let Some(Ctx::Object(k)) = stack.last_mut() {
                        let raw = text.get(start..i.min(b.len())).unwrap_or_default();
                        *k = Some(
                            serde_json::from_str(&format!("\"{raw}\""))
                                .unwrap_or_else(|_| raw.to_string()),
                        );
                    }
                }
            }
            c if c == b'-' || c.is_ascii_digit() => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let lit = text.get(start..i).unwrap_or_default();
                let integer = !lit.contains(['.', 'e', 'E']);
                if integer && lit.parse::<i64>().is_err() && lit.parse::<u64>().is_err() {
                    return Some((at(&stack), lit.to_string()));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod exact_json_tests {
    use super::*;

    #[test]
    fn integers_past_64_bits_are_refused_naming_where() {
        let big = "1606938044258990275541962092341162602522202993782792835301376";
        let e = parse_json_exact(big).unwrap_err().to_string();
        assert!(e.contains("the value") && e.contains(big), "{e}");
        let e = parse_json_exact(&format!(r#"{{"a": 1, "b\"c": [2, {{"x": -{big}}}]}}"#))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("b\"c/1/x") && e.contains(&format!("-{big}")),
            "{e}"
        );
        let e = parse_json_exact(&format!(
            r#"{{"s": "12345678901234567890123", "n": {big}}}"#
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("n: ") && !e.contains("s: "), "{e}");
    }

    #[test]
    fn everything_else_parses_as_serde_json_does() {
        for t in [
            r#"{"a": -9223372036854775808, "b": 18446744073709551615, "c": 1e300}"#,
            r#"[1.5, -0.0, 2E3, "99999999999999999999999", true, null, {"k": []}]"#,
            "12",
        ] {
            assert_eq!(
                parse_json_exact(t).unwrap(),
                serde_json::from_str::<serde_json::Value>(t).unwrap()
            );
        }
        assert!(parse_json_exact("{").is_err());
    }
}
