//! The crate's error type: one enum whose variants carry what a person needs to act on it
//! (which file, which chunk, what was expected and what was found).

use std::path::{Path, PathBuf};

/// Result alias used throughout blz.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error blz reports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error on a named file or directory.
    #[error("{op} {path}: {source}")]
    Io {
        /// What blz was doing (`read`, `write`, `open`, ...).
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A file header (superchunk, metadata section, journal, ...) that cannot be right.
    #[error("{path}: invalid header: {reason}")]
    InvalidHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A Blosc chunk that is malformed or does not decompress.
    #[error("{path}: chunk {chunk}: {reason}")]
    InvalidChunk {
        /// The file holding the chunk.
        path: PathBuf,
        /// The chunk's index within that file.
        chunk: u64,
        /// What is wrong with it.
        reason: String,
    },

    /// A chunk (or metadata section) whose digest does not match its bytes.
    #[error(
        "{path}: {}: checksum mismatch ({algorithm}): stored {expected}, computed {got}",
        chunk_label(*.chunk)
    )]
    ChecksumMismatch {
        /// The file holding the chunk.
        path: PathBuf,
        /// The chunk's index within that file (`u64::MAX` for the metadata section).
        chunk: u64,
        /// The checksum algorithm.
        algorithm: &'static str,
        /// The digest stored in the file, in hex.
        expected: String,
        /// The digest computed from the bytes read, in hex.
        got: String,
    },

    /// A JSON metadata file (or metadata section) that is missing keys or malformed.
    #[error("{path}: invalid metadata: {reason}")]
    InvalidMetadata {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A directory with no `meta` directory, or a `meta/storage` document that is not blz's
    /// (its `format` is not `"blz"`): what is there is not a blz dataset. `blz::open` then
    /// looks for a bcolz directory there.
    #[error("{path}: not a blz dataset ({reason})")]
    NotBlz {
        /// The document.
        path: PathBuf,
        /// What it is instead.
        reason: String,
    },

    /// Compression failed (an argument c-blosc refused, or an output too large).
    #[error("compression failed: {0}")]
    Compress(String),

    /// A chunk index past the end of a superchunk file.
    #[error("{path}: chunk {chunk} out of range (file holds {nchunks} chunks)")]
    ChunkOutOfRange {
        /// The file.
        path: PathBuf,
        /// The requested chunk.
        chunk: u64,
        /// How many chunks the file holds.
        nchunks: u64,
    },

    /// An index, slice or selection outside a dataset's shape.
    #[error("{dataset}: {reason}")]
    OutOfBounds {
        /// The dataset (or file) concerned.
        dataset: PathBuf,
        /// Which index on which axis, and the extent.
        reason: String,
    },

    /// A Rust element type or an input array whose dtype or shape does not fit the dataset.
    #[error("{dataset}: {reason}")]
    Mismatch {
        /// The dataset concerned.
        dataset: PathBuf,
        /// What was expected and what was given.
        reason: String,
    },

    /// A value that a dictionary-encoded column would have to add to its dictionary, which
    /// holds as many entries as its limit allows (`spec/table.md` §3.6). Nothing was written.
    #[error(
        "{dataset}: column {column}: the value {value:?} is not in the dictionary, which holds \
         its limit of {limit} entries (nothing was written)"
    )]
    DictionaryFull {
        /// The table.
        dataset: PathBuf,
        /// The column's path.
        column: String,
        /// The value that does not fit (shown lossily when it is not UTF-8).
        value: String,
        /// The dictionary's limit.
        limit: u64,
    },

    /// Another process holds the dataset's writer lock (or, in this process, something
    /// that does not share it: a create replacing the dataset, a copy, a handle on an
    /// object store).
    #[error("{path}: dataset is locked by another writer{}", holder_note(.holder))]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The process holding it, where the platform tells (the holder wrote its process
        /// id into the lock file, see `spec/dataset.md`).
        holder: Option<u32>,
    },

    /// The dataset was opened read-only and a write was attempted.
    #[error("{path}: dataset is open read-only")]
    ReadOnly {
        /// The dataset.
        path: PathBuf,
    },

    /// Stored data that is well formed but that blz cannot represent (a bcolz `object` dtype,
    /// a compressor blz does not build, ...).
    #[error("{path}: unsupported: {reason}")]
    Unsupported {
        /// The file or directory concerned.
        path: PathBuf,
        /// What blz cannot represent, and what to do about it when something can be done.
        reason: String,
    },

    /// A writer committed a change while this handle was reading, and the read met what the
    /// change removed or rewrote. Nothing is wrong with the dataset: open it again and read
    /// the new state.
    #[error("{path}: changed by a writer while reading; open it again")]
    Changed {
        /// The dataset.
        path: PathBuf,
    },

    /// Another writer committed to the dataset (on an object store) after this handle loaded
    /// its state: nothing of this change was committed. Open the dataset again and retry.
    #[error("{path}: another writer committed first; nothing of this change was committed: open the dataset again and retry")]
    Conflict {
        /// The dataset.
        path: PathBuf,
    },

    /// An input file given to blz (a `.npy` file, a CSV file) that it cannot take: a
    /// malformed header, a dtype blz cannot store, a truncated body, a cell that does not fit
    /// its column. The reason says where in the file when it can (`line 3, column price: ...`).
    #[error("{path}: {reason}")]
    InvalidInput {
        /// The input file.
        path: PathBuf,
        /// What is wrong with it, and where.
        reason: String,
    },

    /// An argument that cannot be honoured (bad codec name, zero chunk size, bad column name...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A query that cannot be planned or run: a syntax error, an unknown table or column, a
    /// type mismatch (the SQL engine's message).
    #[error("SQL: {0}")]
    Sql(String),

    /// A query expression (`where`) that does not parse or whose types do not fit: the
    /// byte position of the fault in the text, and why.
    #[error("invalid expression at position {position}: {reason}\n  {expr}\n  {caret}^", caret = " ".repeat(expr.get(..*position).map_or(0, |s| s.chars().count())))]
    InvalidExpression {
        /// The expression's text.
        expr: String,
        /// Byte offset of the fault in `expr`.
        position: usize,
        /// What is wrong there.
        reason: String,
    },
}

/// Names a chunk in messages; `u64::MAX` stands for a file's metadata section.
fn chunk_label(chunk: u64) -> String {
    if chunk == u64::MAX {
        "metadata section".to_string()
    } else {
        format!("chunk {chunk}")
    }
}

impl Error {
    /// Wraps an I/O error with the operation and path it concerns.
    pub fn io(op: &'static str, path: impl AsRef<Path>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// An [`Error::InvalidHeader`] for `path`.
    pub fn header(path: impl AsRef<Path>, reason: impl Into<String>) -> Self {
        Error::InvalidHeader {
            path: path.as_ref().to_path_buf(),
            reason: reason.into(),
        }
    }

    /// An [`Error::InvalidMetadata`] for `path`.
    pub fn metadata(path: impl AsRef<Path>, reason: impl Into<String>) -> Self {
        Error::InvalidMetadata {
            path: path.as_ref().to_path_buf(),
            reason: reason.into(),
        }
    }

    /// An [`Error::InvalidChunk`] for chunk `chunk` of `path`.
    pub fn chunk(path: impl AsRef<Path>, chunk: u64, reason: impl Into<String>) -> Self {
        Error::InvalidChunk {
            path: path.as_ref().to_path_buf(),
            chunk,
            reason: reason.into(),
        }
    }

    /// An [`Error::Unsupported`] for `path`.
    pub fn unsupported(path: impl AsRef<Path>, reason: impl Into<String>) -> Self {
        Error::Unsupported {
            path: path.as_ref().to_path_buf(),
            reason: reason.into(),
        }
    }

    /// An [`Error::InvalidInput`] for the input file `path`.
    pub fn input(path: impl AsRef<Path>, reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            path: path.as_ref().to_path_buf(),
            reason: reason.into(),
        }
    }

    /// True when a read that failed this way may have met a writer's commit rather than
    /// damage: a missing or short file, a chunk past a file's end, bytes that do not check.
    pub fn may_be_stale(&self) -> bool {
        self.is_corruption()
            || matches!(self, Error::ChunkOutOfRange { .. })
            || matches!(self, Error::Io { source, .. } if matches!(
                source.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::UnexpectedEof
            ))
    }

    /// True when the error reports corrupt stored bytes (bad header, chunk or digest).
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::InvalidHeader { .. }
                | Error::InvalidChunk { .. }
                | Error::ChecksumMismatch { .. }
                | Error::InvalidMetadata { .. }
        )
    }
}

/// How [`Error::Locked`] names the holder of a lock: its process, or this one.
fn holder_note(holder: &Option<u32>) -> String {
    match *holder {
        Some(pid) if pid == std::process::id() => format!(" (process {pid}: this process)"),
        Some(pid) => format!(" (process {pid})"),
        None => String::new(),
    }
}
