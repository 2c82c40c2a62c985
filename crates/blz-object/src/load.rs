//! Loading a state: the state object and the manifests it names, checked, and the manifests a
//! handle loads only when a path needs them.

use crate::client::runtime;
use crate::client::Backend;
use crate::client::Client;
use crate::entry::check_entries;
use crate::entry::wrong_size;
use crate::entry::StateFile;
use crate::handle::ObjectStorage;
use crate::handle::Tree;
use crate::keys::plain_key;
use crate::keys::MAX_STATE;
use crate::keys::STATE_FORMAT;
use crate::keys::STATE_KEY;
use crate::keys::STATE_VERSION;
use crate::keys::STATE_VERSION_WHOLE;
use crate::manifest;
use crate::manifest::Manifest;
use crate::manifest::ManifestDoc;
use crate::spool::node_of;
use crate::state::unix_secs;
use crate::state::State;
use blz_format::error::Error;
use blz_format::error::Result;
use bytes::Bytes;
use futures::StreamExt;
use object_store::GetOptions;
use object_store::ObjectStore;
use object_store::UpdateVersion;
use std::collections::HashSet;
use std::time::SystemTime;
impl Backend {
    /// Reads the state object and the manifests it names: the state (every file's entry in
    /// its `files`), its version and when the store stored it (its Last-Modified, seconds
    /// since the Unix epoch by the store's clock), or none when it is absent.
    pub(crate) fn fetch_state(
        &self,
    ) -> Result<(Option<State>, Option<UpdateVersion>, Option<u64>)> {
        self.fetch_state_with(true)
    }

    /// [`Backend::fetch_state`], fetching the manifests only when `manifests` says so
    /// (without them, the state's `files` holds only the state object's own entries: for
    /// a reader of its write ids).
    pub(crate) fn fetch_state_with(
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
    pub(crate) fn check_manifest_list(&self, state: &State) -> Result<()> {
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
    pub(crate) fn load_manifests(
        &self,
        state: &mut State,
        which: impl Fn(&Manifest) -> bool,
    ) -> Result<()> {
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

impl ObjectStorage {
    /// Reads the manifests the committed state names, if this handle has not yet, and adds
    /// their files to the visible tree (where the overlay has not put a file of its own at
    /// a path). Every listing calls it first ([`Self::load_pending_where`] for the rest).
    ///
    /// # Errors
    /// As [`ObjectStorage::new`]; the handle stays as it was (the next call tries again).
    pub(crate) fn load_pending(&self) -> Result<()> {
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
    pub(crate) fn load_pending_where(&self, which: impl Fn(&Manifest) -> bool) -> Result<()> {
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
    pub(crate) fn rel_of_key<'k>(&self, key: &'k str) -> Option<&'k str> {
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
    pub(crate) fn load_if_may_hold(&self, key: &str) -> Result<()> {
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
    pub(crate) fn found_or_loaded(&self, key: &str, found: impl Fn(&Tree) -> bool) -> bool {
        if found(&self.tree()) {
            return true;
        }
        // With no manifest to read, the load does nothing and the tree answers as before.
        self.load_if_may_hold(key)
            .map_or(true, |()| found(&self.tree()))
    }
}
