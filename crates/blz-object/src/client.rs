//! The client: one dataset's prefix of a bucket (`Backend`), the runtime its requests run on,
//! uploads, read settings and the request log, and how a store's errors become blz's.

use crate::config::parse_s3_url;
use crate::config::s3_clients;
use crate::config::secs;
use crate::config::S3Timeouts;
use crate::keys::MAX_BLOCK_INDEXES;
use crate::keys::PARALLEL;
use crate::manifest;
use blz_format::error::Error;
use blz_format::error::Result;
use bytes::Bytes;
use futures::StreamExt;
use futures::TryStreamExt;
use object_store::path::Path as OPath;
use object_store::ObjectStore;
use object_store::ObjectStoreExt;
use object_store::PutPayload;
use std::io::ErrorKind;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
/// The tokio runtime every object-store call runs on, made on first use.
pub(crate) fn runtime() -> Result<&'static tokio::runtime::Runtime> {
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

pub(crate) fn store_error(op: &'static str, path: &Path, e: object_store::Error) -> Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        _ => ErrorKind::Other,
    };
    Error::io(op, path, std::io::Error::new(kind, e))
}

pub(crate) fn not_found(op: &'static str, path: &Path) -> Error {
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
pub(crate) async fn put_object(
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
pub(crate) fn parts_note(len: usize) -> String {
    if len <= MULTIPART_MIN {
        String::new()
    } else {
        format!("multipart parts={}", len.div_ceil(UPLOAD_PART))
    }
}

/// What kind of failure to reach the endpoint an `object_store` error is, if it is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unreachable {
    /// No connection within the connect timeout.
    ConnectTimeout,
    /// Connected, then no answer (or no progress) in time.
    Timeout,
    /// The connection was refused or failed.
    Connect,
}

pub(crate) fn unreachable(e: &object_store::Error) -> Option<Unreachable> {
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
pub(crate) enum Client {
    Read,
    Write,
}

/// The object store and what every file handle needs of it.
#[derive(Debug)]
pub(crate) struct Backend {
    pub(crate) store: Arc<dyn ObjectStore>,
    /// The client for uploads, commits and deletions (the same as `store` for a store
    /// given by the caller).
    pub(crate) write_store: Arc<dyn ObjectStore>,
    /// The endpoint and timeouts of an S3 client made from the environment (for messages).
    pub(crate) endpoint: Option<(String, S3Timeouts)>,
    /// The key prefix of the dataset root (no trailing `/`).
    pub(crate) prefix: String,
    /// The dataset root as callers name it (`s3://bucket/prefix`).
    pub(crate) root: PathBuf,
    pub(crate) requests: AtomicU64,
    /// Where every request is recorded, one line each ([`REQUEST_LOG_VAR`]).
    pub(crate) log: Option<Arc<std::fs::File>>,
    /// How reads of many ranges become requests, and the slots that bound the requests of
    /// reads in flight at once ([`ReadTuning::concurrency`]).
    pub(crate) reads: Mutex<(ReadTuning, Arc<tokio::sync::Semaphore>)>,
    /// The bytes of block indexes a commit puts in the state, at most
    /// ([`ObjectStorage::set_inline_block_indexes`]).
    pub(crate) inline_indexes: AtomicU64,
    /// The bytes of unchanged entries a commit gathers in the state before sealing them
    /// into a manifest ([`ObjectStorage::set_manifest_bytes`]); 0 seals none.
    pub(crate) manifest_bytes: AtomicU64,
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
    pub(crate) fn parts(&self, span: std::ops::Range<u64>) -> Vec<std::ops::Range<u64>> {
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
pub(crate) fn bytes_from_env(var: &str, default: u64) -> Result<u64> {
    match std::env::var(var).ok().filter(|v| !v.trim().is_empty()) {
        None => Ok(default),
        Some(v) => v.trim().parse::<u64>().map_err(|_| {
            Error::InvalidArgument(format!("{var}={v:?}: expected a whole number of bytes"))
        }),
    }
}

/// The slots of `t.concurrency` requests in flight.
pub(crate) fn read_slots(t: &ReadTuning) -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(
        t.concurrency.clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
    ))
}

/// The environment variable naming a file to which every request of an `s3://` handle
/// appends one line (`spec/object-store.md` §1): `METHOD URL`, then `bytes=A-B` for a
/// ranged read and `if-match` or `if-none-match` for a conditional write. For tests and
/// for seeing what a command costs; unset, nothing is recorded.
pub const REQUEST_LOG_VAR: &str = "BLZ_S3_REQUEST_LOG";

/// The file [`REQUEST_LOG_VAR`] names, opened to append once per process (`None` when the
/// variable is unset or empty).
pub(crate) fn request_log() -> Result<Option<Arc<std::fs::File>>> {
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
    pub(crate) async fn upload(&self, key: &str, path: &Path, bytes: Bytes) -> Result<()> {
        self.note("PUT", key, format_args!("{}", parts_note(bytes.len())));
        let started = std::time::Instant::now();
        put_object(self.client(Client::Write), &self.key(key), bytes)
            .await
            .map_err(|e| self.error("upload", path, Client::Write, started, e))
    }

    /// The backend of the dataset under `prefix` in `store`, named `<base>/<prefix>`, with
    /// the default read settings (no endpoint, no request log).
    pub(crate) fn in_store(store: Arc<dyn ObjectStore>, base: &Path, prefix: &str) -> Backend {
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
    pub(crate) fn for_url(url: &str) -> Result<(Backend, String)> {
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
    pub(crate) fn below(&self, rel: &str) -> Backend {
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
    pub(crate) fn delete_all<'k>(&self, keys: impl IntoIterator<Item = &'k String>) -> Result<()> {
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

    pub(crate) fn key(&self, rel_key: &str) -> OPath {
        if self.prefix.is_empty() {
            OPath::from(rel_key)
        } else {
            OPath::from(format!("{}/{rel_key}", self.prefix))
        }
    }

    /// Counts one request (`method` of the object `key`, relative to the prefix; `what`
    /// says more: a range, a condition) and records it in the request log, if there is one.
    pub(crate) fn note(&self, method: &str, key: &str, what: std::fmt::Arguments<'_>) {
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
    pub(crate) fn client(&self, client: Client) -> &Arc<dyn ObjectStore> {
        match client {
            Client::Read => &self.store,
            Client::Write => &self.write_store,
        }
    }

    /// An `object_store` error of a request to `path` (`op`, started at `started`, through
    /// `client`) as blz reports it: a timeout or a failure to connect names the endpoint
    /// and the bound that was reached (`ErrorKind::TimedOut`, `ErrorKind::NotConnected`).
    pub(crate) fn error(
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
}

/// The length of `r` as a buffer size: [`eof`] for a range no file of this process holds.
pub(crate) fn range_len(r: &std::ops::Range<u64>, path: &Path) -> Result<usize> {
    r.end
        .checked_sub(r.start)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| eof(path))
}

pub(crate) fn eof(path: &Path) -> Error {
    Error::io(
        "read",
        path,
        std::io::Error::new(ErrorKind::UnexpectedEof, "read past the end of the file"),
    )
}
