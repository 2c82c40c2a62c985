//! The state document: the one object (`meta/state`) that names every file of a dataset, its
//! entries (an object, extents or inline text), its bounds and its write ids (`spec/object-
//! store.md` §3).

use crate::entry::StateFile;
use crate::keys::STATE_VERSION;
use crate::keys::STATE_VERSION_EXTENTS;
use crate::keys::STATE_VERSION_WHOLE;
use crate::manifest::Manifest;
use blz_format::error::Error;
use blz_format::error::Result;
use serde::Deserialize;
use serde::Serialize;
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::path::Path;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;
/// `state`'s JSON, at most `max` bytes long: when it is longer, files' fronts (copies of
/// bytes their objects hold, which a reader can do without, `spec/object-store.md` §3) are
/// left out, from the last file in path order back, until it fits.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the state object `path` when the state is longer than
/// `max` bytes without any front (a dataset of more files than one state can name).
pub(crate) fn state_bytes(state: &mut State, max: u64, path: &Path) -> Result<Vec<u8>> {
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

/// An object a commit stopped using, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retired {
    /// The object's key below the dataset's prefix.
    pub key: String,
    /// When the commit that stopped using it was made (seconds since the Unix epoch, by the
    /// writer's clock: for people; [`collect_garbage`](crate::collect_garbage) does not trust it).
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
    /// Always [`STATE_FORMAT`](crate::STATE_FORMAT).
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
pub(crate) struct StateOut<'a> {
    pub(crate) format: &'a str,
    pub(crate) version: u32,
    pub(crate) generation: u64,
    pub(crate) committed_at: u64,
    pub(crate) files: BTreeMap<&'a str, &'a StateFile>,
    pub(crate) retired: &'a [Retired],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) write_id: &'a Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) earlier_write_ids: &'a Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) manifests: &'a Vec<Manifest>,
}

impl State {
    /// A first state (generation 1, nothing retired, no write id) holding `files`, some of
    /// them in `manifests`, of the version they need.
    #[cfg(test)]
    pub(crate) fn first(files: BTreeMap<String, StateFile>, manifests: Vec<Manifest>) -> State {
        State {
            format: crate::keys::STATE_FORMAT.into(),
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
    pub(crate) fn version_for(files: &BTreeMap<String, StateFile>, manifests: &[Manifest]) -> u32 {
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
    pub(crate) fn held(&self) -> HashSet<&str> {
        self.manifests
            .iter()
            .flat_map(|m| m.paths.iter().map(String::as_str))
            .collect()
    }

    /// The state object's JSON: the files no manifest holds, and the manifests.
    pub(crate) fn to_json(&self) -> serde_json::Result<Vec<u8>> {
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
    pub(crate) fn stamp_write(&mut self) {
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
    pub(crate) fn records_write(&self, id: &str) -> bool {
        self.write_id.as_deref() == Some(id) || self.earlier_write_ids.iter().any(|w| w == id)
    }
}

pub(crate) fn now_secs() -> u64 {
    unix_secs(SystemTime::now())
}

pub(crate) fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
