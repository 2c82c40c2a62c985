//! Shared prefixes: where the workers of a staged write leave their files, seen by every process
//! before any commit (`spec/object-store.md` §8).

use crate::client::runtime;
use crate::client::Backend;
use crate::client::Client;
use crate::keys::plain_name;
use blz_format::error::Error;
use blz_format::error::Result;
use blz_format::storage::SharedDir;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as OPath;
use object_store::GetOptions;
use object_store::ObjectStore;
use std::path::Path;
/// The key prefix, below a dataset's, of the sessions of staged writes on it
/// ([`Storage::shared_dir`](blz_format::storage::Storage::shared_dir)): `staged/<id>/`.
pub(crate) const STAGED_PREFIX: &str = "staged";

/// A shared directory on an object store: the objects below a key prefix, each file one
/// object ([`SharedDir`]). A staged write's session is `PREFIX/staged/<id>/`.
pub struct SharedPrefix {
    pub(crate) backend: Backend,
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
    /// environment as [`ObjectStorage::open_url`](crate::ObjectStorage::open_url)'s (no request is
    /// made).
    ///
    /// # Errors
    /// As [`parse_s3_url`](crate::parse_s3_url) and [`s3_store`](crate::s3_store).
    pub fn open_url(url: &str) -> Result<SharedPrefix> {
        let (backend, _) = Backend::for_url(url)?;
        Ok(SharedPrefix { backend })
    }

    pub(crate) fn check_name(&self, name: &str) -> Result<()> {
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
