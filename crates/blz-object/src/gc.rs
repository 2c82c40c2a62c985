//! Garbage collection: deleting the objects no current or recent state names (`spec/object-
//! store.md` §7).

use crate::client::runtime;
use crate::client::Client;
use crate::entry::StateFile;
use crate::handle::Committed;
use crate::handle::ObjectStorage;
use crate::keys::first_commit_upload;
use crate::keys::STATE_KEY;
use crate::shared::STAGED_PREFIX;
use crate::state::unix_secs;
use blz_format::error::Error;
use blz_format::error::Result;
use futures::TryStreamExt;
use object_store::path::Path as OPath;
use object_store::ObjectStore;
use object_store::ObjectStoreExt;
use object_store::PutPayload;
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::time::Duration;
use std::time::SystemTime;
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
