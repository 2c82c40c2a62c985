//! The one entrance: [`open`] any dataset at a path or URL and get it as the kind it is
//! ([`AnyDataset`]), its kind read once from its `meta/storage` (or a bcolz directory read
//! in place). Clients (the command line, the Python package) open through here and decide
//! nothing themselves.

use crate::bcolz::{self, CarrayReader, CtableReader};
use crate::engine::{Mode, Root};
use crate::error::{Error, Result};
use crate::meta::Kind;
use crate::storage::{self, Storage};
use crate::{Dataset, Layer, Table};
use std::path::Path;
use std::sync::Arc;

/// A dataset of any kind, as [`open`] found it.
#[derive(Debug)]
#[non_exhaustive]
#[expect(
    clippy::large_enum_variant,
    reason = "a handle is opened once and moved out by a match; boxing would only add an \
              allocation and a deref for the user"
)]
pub enum AnyDataset {
    /// An N-d array.
    Array(Dataset),
    /// A table of named columns.
    Table(Table),
    /// A sorted layer dataset (read-only: it is written once).
    Layer(Layer),
    /// A bcolz carray or ctable, read in place (read-only).
    Bcolz(BcolzDataset),
}

/// A bcolz directory opened in place.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "opened once and moved out by a match, as AnyDataset"
)]
pub enum BcolzDataset {
    /// A carray.
    Carray(CarrayReader),
    /// A ctable.
    Ctable(CtableReader),
}

impl AnyDataset {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            AnyDataset::Array(_) => Kind::Array,
            AnyDataset::Table(_) => Kind::Table,
            AnyDataset::Layer(_) => Kind::Layer,
            AnyDataset::Bcolz(BcolzDataset::Carray(_)) => Kind::BcolzCarray,
            AnyDataset::Bcolz(BcolzDataset::Ctable(_)) => Kind::BcolzCtable,
        }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        match self {
            AnyDataset::Array(d) => d.path(),
            AnyDataset::Table(t) => t.path(),
            AnyDataset::Layer(l) => l.path(),
            AnyDataset::Bcolz(BcolzDataset::Carray(c)) => c.path(),
            AnyDataset::Bcolz(BcolzDataset::Ctable(c)) => c.path(),
        }
    }

    /// The array, or an error naming the kind it is.
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] when it is another kind of dataset.
    pub fn into_array(self) -> Result<Dataset> {
        match self {
            AnyDataset::Array(d) => Ok(d),
            other => Err(other.not_a(Kind::Array)),
        }
    }

    /// The table, or an error naming the kind it is.
    ///
    /// # Errors
    /// As [`AnyDataset::into_array`].
    pub fn into_table(self) -> Result<Table> {
        match self {
            AnyDataset::Table(t) => Ok(t),
            other => Err(other.not_a(Kind::Table)),
        }
    }

    /// The layer, or an error naming the kind it is.
    ///
    /// # Errors
    /// As [`AnyDataset::into_array`].
    pub fn into_layer(self) -> Result<Layer> {
        match self {
            AnyDataset::Layer(l) => Ok(l),
            other => Err(other.not_a(Kind::Layer)),
        }
    }

    fn not_a(&self, wanted: Kind) -> Error {
        Error::metadata(
            self.path().join("meta").join("storage"),
            format!(
                "this is a {} dataset, not a {wanted} (open it with the {} API)",
                self.kind(),
                self.kind()
            ),
        )
    }
}

/// Opens the dataset at `path` (a directory, an `s3://` URL or a `memory://` URL) read-only, as the kind it
/// is: one read of its `meta/storage` decides the kind and opens it (on an object store,
/// one load of its state). A bcolz carray or ctable directory opens in place.
///
/// # Errors
/// A `NotFound` I/O error when nothing is there (for a `memory://` URL: no dataset of that
/// name in this process); [`Error::InvalidMetadata`] when it is not
/// a blz (or bcolz) dataset or its meta files are malformed; [`Error::Unsupported`] for a
/// kind a newer blz wrote; otherwise as the kind's own open.
pub fn open(path: impl AsRef<Path>) -> Result<AnyDataset> {
    open_path(path.as_ref(), Mode::ReadOnly)
}

/// As [`open`], for reading and writing: takes the dataset's writer lock.
///
/// # Errors
/// As [`open`]; [`Error::Locked`] while another writer holds the lock;
/// [`Error::ReadOnly`] for a layer dataset or a bcolz directory, which are only read.
pub fn open_rw(path: impl AsRef<Path>) -> Result<AnyDataset> {
    open_path(path.as_ref(), Mode::ReadWrite)
}

fn open_path(path: &Path, mode: Mode) -> Result<AnyDataset> {
    let (storage, root) = storage::for_path(path)?;
    if storage::memory::is_memory_url(path) && !storage.exists(&root) {
        return Err(storage::memory::not_here(&root));
    }
    let e = match open_in(storage, &root, mode) {
        Ok(d) => return Ok(d),
        Err(e) if storage::is_url(path) || storage::memory::is_memory_url(path) => return Err(e),
        Err(e) => e,
    };
    // What is there may be a bcolz directory (only on a filesystem), which opens in place:
    // its `meta/storage` is not blz's, or not JSON serde reads (bcolz writes Python's).
    let storage_doc = root.join("meta").join("storage");
    let foreign =
        !is_blz(&e) || matches!(&e, Error::InvalidMetadata { path: p, .. } if *p == storage_doc);
    if !foreign {
        return Err(e);
    }
    // The bcolz reader's own error is the one to report only when blz's says it is not a
    // blz dataset at all.
    let ours = is_blz(&e);
    let pick = move |bcolz_error: Error| if ours { e } else { bcolz_error };
    // `root`, not `path`: a `file://` URL names the directory `root`.
    let opened = match bcolz::detect(&root) {
        Ok(bcolz::Kind::Carray) => CarrayReader::open(&root).map(BcolzDataset::Carray),
        Ok(bcolz::Kind::Ctable) => CtableReader::open(&root).map(BcolzDataset::Ctable),
        Err(_) => Err(Error::InvalidArgument(format!(
            "{}: not a blz dataset (no meta directory with blz's meta/storage), nor a bcolz carray \
             or ctable",
            path.display(),
        ))),
    };
    match opened {
        Ok(_) if mode == Mode::ReadWrite => Err(Error::ReadOnly {
            path: path.to_path_buf(),
        }),
        Ok(b) => Ok(AnyDataset::Bcolz(b)),
        Err(be) => Err(pick(be)),
    }
}

/// True when an open failed on what is a blz dataset (its error is the one to report),
/// false when what is there is not one (its `meta/storage` is not blz's).
fn is_blz(e: &Error) -> bool {
    !matches!(e, Error::NotBlz { .. })
}

/// As [`open`], on a given storage backend and in a given mode.
///
/// # Errors
/// As [`open`] and [`open_rw`].
pub fn open_in(storage: Arc<dyn Storage>, root: &Path, mode: Mode) -> Result<AnyDataset> {
    let (root, kind, raw) = Root::open(&storage, root, mode, None, false)?;
    Ok(match kind {
        Kind::Array => AnyDataset::Array(Dataset::from_root(root, raw)?),
        Kind::Table => AnyDataset::Table(Table::from_root(root, raw)?),
        Kind::Layer => AnyDataset::Layer(Layer::from_root(root, raw)?),
        Kind::BcolzCarray | Kind::BcolzCtable => {
            return Err(Error::Unsupported {
                path: root.to_path_buf(),
                reason: "a bcolz directory has no blz meta/storage".into(),
            })
        }
    })
}

/// How many times [`on_latest_commit`] makes a read again that met writers' commits.
pub const CHANGED_RETRIES: u32 = 20;

/// An error that may say a read met a writer's commit ([`Error::Changed`]): what
/// [`on_latest_commit`] makes the read again for. A client with an error type of its own
/// (a binding's, which also carries its language's exceptions) says which of its errors
/// are that one.
pub trait MaybeChanged {
    /// Whether this is [`Error::Changed`].
    fn is_changed(&self) -> bool;
}

impl MaybeChanged for Error {
    fn is_changed(&self) -> bool {
        matches!(self, Error::Changed { .. })
    }
}

/// Runs `read` on the latest commit of a dataset handle, the one loop every client (the
/// Python package, the command line) makes its reads through: `refresh` first brings the
/// handle to the latest commit (as [`Dataset::refresh`] and [`Table::refresh`] do), then
/// `read` runs; a read that met a writer's commit while it ran ([`Error::Changed`]: it may
/// hold chunks of two commits) is thrown away and made again after a new `refresh`, up to
/// [`CHANGED_RETRIES`] times, with short pauses growing from 1 ms to 50 ms between tries (a
/// writer applying its commit in place is given time to finish). One call shows one commit
/// whole.
///
/// ```
/// use blz::{on_latest_commit, Error};
/// let (mut refreshes, mut tries) = (0, 0);
/// let r: blz::Result<u32> = on_latest_commit(
///     || {
///         refreshes += 1;
///         Ok(())
///     },
///     || {
///         tries += 1;
///         if tries < 3 {
///             Err(Error::Changed { path: "a.blz".into() })
///         } else {
///             Ok(7)
///         }
///     },
/// );
/// assert_eq!(r.unwrap(), 7);
/// assert_eq!((refreshes, tries), (3, 3));
/// ```
///
/// # Errors
/// The first error of `refresh`, or of `read` other than a changed read; the last
/// [`Error::Changed`] when every try met a commit.
pub fn on_latest_commit<T, E: MaybeChanged>(
    mut refresh: impl FnMut() -> std::result::Result<(), E>,
    mut read: impl FnMut() -> std::result::Result<T, E>,
) -> std::result::Result<T, E> {
    let mut pause = std::time::Duration::from_millis(1);
    let mut tries = 0;
    loop {
        refresh()?;
        match read() {
            Err(e) if e.is_changed() && tries < CHANGED_RETRIES => {
                tries += 1;
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            r => return r,
        }
    }
}
