//! Where bytes live: the storage backends of `blz_format::storage` (the local filesystem,
//! this process's memory, fault injection), the object store of the `blz-object` crate with
//! the `s3` feature ([`object`], [`ObjectStorage`]), and the one function that resolves a
//! path or URL to the storage holding it ([`for_path`]).
//!
//! The URL dispatch lives here, above both backends' crates: `blz_format` knows no object
//! store, and `blz_object` knows no local path.

pub use blz_format::storage::*;
/// The object-store backend (the `blz-object` crate): [`ObjectStorage`], its state,
/// manifests and garbage collection (`object::collect_garbage`).
#[cfg(feature = "s3")]
pub use blz_object as object;
#[cfg(feature = "s3")]
pub use blz_object::manifest;
#[cfg(feature = "s3")]
pub use blz_object::ObjectStorage;

use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// The shared directory at `location`, an `s3://bucket/key` URL (a staged write's session
/// on an object store, as [`SharedDir::location`] names it), for a worker in any process.
///
/// # Errors
/// As [`for_path`] for a URL; [`Error::InvalidArgument`] for a location that is not one.
pub fn shared_dir_at(location: &Path) -> Result<Arc<dyn SharedDir>> {
    if !is_url(location) {
        return Err(Error::InvalidArgument(format!(
            "{}: not an s3:// URL",
            location.display()
        )));
    }
    #[cfg(feature = "s3")]
    {
        Ok(Arc::new(blz_object::SharedPrefix::open_url(
            &location.to_string_lossy(),
        )?))
    }
    #[cfg(not(feature = "s3"))]
    {
        Err(Error::Unsupported {
            path: location.to_path_buf(),
            reason: "this build of blz has no object-store support (the `s3` feature)".into(),
        })
    }
}

/// True when `path` names a dataset on an object store (`s3://bucket/key`).
pub(crate) fn is_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with("s3://"))
}

/// The scheme of `path` when it is written as a URL (`scheme://...`, the scheme as RFC 3986
/// spells one: a letter, then letters, digits, `+`, `-` or `.`), or `None` for a plain path.
fn url_scheme(path: &Path) -> Option<&str> {
    let s = path.to_str()?;
    let (scheme, _) = s.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// The local path a `file://` URL names: `file:///abs/path` (or `file://localhost/abs/path`)
/// is `/abs/path`, and `file://rel/path` is taken as the relative path `rel/path`, as fsspec
/// does. Percent escapes (`%20`, as `pathlib.Path.as_uri` writes a space) are decoded.
fn file_url_path(path: &Path, url: &str) -> Result<std::path::PathBuf> {
    let rest = url.get("file://".len()..).unwrap_or_default();
    let rest = rest
        .strip_prefix("localhost")
        .filter(|abs| abs.starts_with('/'))
        .unwrap_or(rest);
    let bad = |reason: &str| Error::InvalidArgument(format!("{}: {reason}", path.display()));
    if rest.is_empty() {
        return Err(bad("a file:// URL that names no path"));
    }
    let raw = rest.as_bytes();
    let mut bytes = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if b == b'%' {
            let hex = raw
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad("a file:// URL with a % not followed by two hex digits"))?;
            bytes.push(hex);
            i += 3;
        } else {
            bytes.push(b);
            i += 1;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Ok(std::path::PathBuf::from(std::ffi::OsString::from_vec(
            bytes,
        )))
    }
    #[cfg(not(unix))]
    {
        String::from_utf8(bytes)
            .map(std::path::PathBuf::from)
            .map_err(|_| bad("a file:// URL that is not UTF-8 once decoded"))
    }
}

/// The storage that holds `path` and the dataset root to give it: an [`ObjectStorage`] for
/// an `s3://bucket/key` URL (its state loaded now; configured from the standard AWS
/// environment variables), this process's memory for a `memory://name` URL
/// (`memory::for_url`), the local filesystem for a plain path or a `file://` URL (its
/// path, see [`file_url_path`]).
///
/// # Errors
/// [`Error::Unsupported`] for a URL of any other scheme (`gs://`, `https://`...): blz does
/// not serve it, and never takes it for a local directory. For an
/// `s3://` URL: [`Error::InvalidArgument`] when it is malformed or the S3 configuration is
/// incomplete, [`Error::Unsupported`] in a build without the `s3` feature, I/O errors
/// reading the dataset's state. [`Error::InvalidArgument`] for a malformed `file://` URL.
pub fn for_path(path: &Path) -> Result<(Arc<dyn Storage>, std::path::PathBuf)> {
    match url_scheme(path) {
        None => return Ok((local(), path.to_path_buf())),
        Some("s3") => {}
        Some("memory") => return memory::for_url(path),
        Some(scheme) if scheme.eq_ignore_ascii_case("file") => {
            let url = path.to_str().unwrap_or_default();
            return Ok((local(), file_url_path(path, url)?));
        }
        Some(scheme) => {
            return Err(Error::unsupported(
                path,
                format!(
                    "blz does not serve {scheme}:// URLs: a dataset is a local path (plain, or \
                     a file:// URL), an s3://bucket/key URL or a memory://name URL"
                ),
            ))
        }
    }
    #[cfg(feature = "s3")]
    {
        let s = ObjectStorage::open_url(&path.to_string_lossy())?;
        let root = s.root().to_path_buf();
        Ok((Arc::new(s), root))
    }
    #[cfg(not(feature = "s3"))]
    {
        Err(Error::Unsupported {
            path: path.to_path_buf(),
            reason: "this build of blz has no object-store support (the `s3` feature)".into(),
        })
    }
}

/// [`for_path`] for a dataset about to be created at `path`: with `overwrite` off, an
/// `s3://` URL's storage is made without waiting for its state
/// ([`ObjectStorage::open_url_to_create`]: the state's GET runs while the create builds,
/// and its commit is refused if the dataset was there after all).
///
/// # Errors
/// As [`for_path`].
pub fn for_new_path(
    path: &Path,
    overwrite: bool,
) -> Result<(Arc<dyn Storage>, std::path::PathBuf)> {
    #[cfg(feature = "s3")]
    if is_url(path) && !overwrite {
        let s = ObjectStorage::open_url_to_create(&path.to_string_lossy())?;
        let root = s.root().to_path_buf();
        return Ok((Arc::new(s), root));
    }
    let _ = overwrite;
    for_path(path)
}
