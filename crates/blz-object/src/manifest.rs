//! Manifests: sealed groups of a state's file entries, each an immutable object of its own
//! (`spec/object-store.md` §3, "Manifests"), so that a commit uploads the entries it changed
//! and a few small manifests at most, not every file's entry again.
//!
//! In memory a [`State`](crate::State) always holds every file's entry in
//! [`State::files`](crate::State::files); its [`State::manifests`](crate::State::manifests) say
//! which of them live in a manifest object. The state object written holds the others (the *tail*)
//! and the list of manifests; loading it fetches the manifests and puts their entries back. A
//! commit keeps every manifest whose entries it left as they were, turns the others back into tail
//! entries, seals the tail's unchanged entries into a new manifest once they reach the sealing
//! size, and merges `FANOUT` manifests of one level into one of the next, so that a dataset of
//! `n` files has `O(log n)` manifests and each entry is rewritten `O(log n)` times in its life.

use crate::entry::StateFile;
use bytes::Bytes;
use serde::Deserialize;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::collections::HashSet;

/// The `format` value of a manifest object.
pub(crate) const MANIFEST_FORMAT: &str = "blz-object-manifest";
/// The manifest object's layout version.
pub(crate) const MANIFEST_VERSION: u32 = 1;
/// Where manifests live, relative to the dataset's prefix: `manifests/<generation>-<tag>.<n>`.
pub const MANIFEST_DIR: &str = "manifests";
/// The bytes of unchanged entries (as JSON) a state's tail gathers before they are sealed
/// into a manifest, unless a handle sets another bound
/// ([`crate::ObjectStorage::set_manifest_bytes`]) or the environment does
/// ([`MANIFEST_BYTES_VAR`]). Below it (about a hundred superchunk files with fronts and block
/// indexes), a dataset has no manifests and an open is the one GET of the state.
pub const MANIFEST_BYTES: u64 = 256 << 10;
/// The environment variable setting the sealing size ([`MANIFEST_BYTES`]) for handles made
/// from an `s3://` URL: a whole number of bytes; `0` seals nothing (every entry in the state,
/// as blz wrote before manifests).
pub const MANIFEST_BYTES_VAR: &str = "BLZ_S3_MANIFEST_BYTES";
/// How many manifests of one level are merged into one of the next level.
pub(crate) const FANOUT: usize = 4;
/// Largest manifest a commit makes (but for one of a single larger entry): sealing makes
/// several rather than a larger one, and a merge that would make a larger one is not made
/// (so no manifest nears the 64 MiB a reader reads).
pub(crate) const MAX_MERGED: u64 = 16 << 20;

/// Most manifests a state may name: a reader refuses a state naming more (a writer makes
/// about `log4` of the entries' bytes over the sealing size, a few dozen at most).
pub(crate) const MAX_MANIFESTS: usize = 65_536;
/// Most bytes a state's manifests may take in all: a reader refuses a state whose manifests'
/// sizes add up to more, before fetching any (4 GiB: the entries of about a million
/// superchunk files).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 4 << 30;

/// Highest level a manifest may have: a reader refuses a state naming one past it. No
/// writer makes one: [`level_of`] stays under it for any size at any sealing size
/// (`FANOUT^32` is `2^64`), and merges reach it only from `FANOUT^32` sealed manifests.
pub(crate) const MAX_LEVEL: u32 = 32;

/// A manifest the state names: an immutable object holding some files' entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The object's key below the dataset's prefix.
    pub key: String,
    /// The object's size in bytes.
    pub size: u64,
    /// 0 for a manifest sealed from the tail, one more than its parts' for a merged one.
    pub level: u32,
    /// The paths of the files it holds (known once it is loaded or written; not stored in
    /// the state object).
    #[serde(skip)]
    pub paths: Vec<String>,
    /// The directories its files lie in (each file's path up to its last `/`; `""` for
    /// the root), sorted, each once: a reader that has not loaded it knows a path outside
    /// them is not its. Absent in manifests of states written before: any path may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirs: Option<Vec<String>>,
    /// For each of [`dirs`](Self::dirs), in its order, the first and the last name of its
    /// files there in natural order ([`natural_cmp`]): a reader that has not loaded it
    /// knows a file named outside them is not its (the next superchunk file an append
    /// makes, say). Absent in manifests of states written before: any name may be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spans: Option<Vec<[String; 2]>>,
    /// Whether [`paths`](Self::paths) is known: the manifest was written by this handle or
    /// loaded since (not stored in the state object).
    #[serde(skip)]
    pub loaded: bool,
}

impl Manifest {
    /// Whether it may hold the file or directory at `rel` (a path below the dataset root),
    /// as its [`dirs`](Self::dirs) and [`spans`](Self::spans) tell without loading it.
    pub fn may_hold(&self, rel: &str) -> bool {
        let Some(dirs) = &self.dirs else {
            return true;
        };
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let below = format!("{rel}/");
        dirs.iter().enumerate().any(|(i, d)| {
            if rel.is_empty() || d == rel || d.starts_with(&below) {
                // A directory holding its files.
                return true;
            }
            if d != parent {
                return false;
            }
            match self.spans.as_ref().and_then(|s| s.get(i)) {
                Some([first, last]) => {
                    natural_cmp(first, name) != Ordering::Greater
                        && natural_cmp(name, last) != Ordering::Greater
                }
                None => true,
            }
        })
    }

    /// Whether a commit writing `files` (every file's new entry) over the loaded state's
    /// `old` keeps it: it is not loaded (then no change touched a file it may hold: each
    /// loads the manifests first), or every file it holds keeps its entry exactly.
    pub(crate) fn kept(
        &self,
        old: &BTreeMap<String, StateFile>,
        files: &BTreeMap<String, StateFile>,
    ) -> bool {
        !self.loaded
            || self
                .paths
                .iter()
                .all(|p| matches!((old.get(p), files.get(p)), (Some(a), Some(b)) if a == b))
    }
}

/// Compares two file names in natural order, so that `__9__.bin` comes before
/// `__10__.bin`: each name is cut into maximal runs of ASCII digits and runs of other
/// characters; the runs are compared pairwise from the first, two digit runs by their
/// numeric value (leading zeros ignored: the one with more significant digits is greater,
/// else the bytes decide), any other pair bytewise; the first unequal pair decides; a name
/// whose runs end first is less; names whose runs are all equal compare bytewise.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    fn runs(s: &str) -> impl Iterator<Item = &str> {
        let b = s.as_bytes();
        let mut at = 0;
        std::iter::from_fn(move || {
            if at == b.len() {
                return None;
            }
            let digit = b[at].is_ascii_digit();
            let start = at;
            while at < b.len() && b[at].is_ascii_digit() == digit {
                at += 1;
            }
            // Cuts fall between an ASCII digit and another byte: at a char boundary.
            Some(&s[start..at])
        })
    }
    let (mut x, mut y) = (runs(a), runs(b));
    loop {
        let order = match (x.next(), y.next()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) => {
                if p.as_bytes()[0].is_ascii_digit() && q.as_bytes()[0].is_ascii_digit() {
                    let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                    p.len().cmp(&q.len()).then_with(|| p.cmp(q))
                } else {
                    p.cmp(q)
                }
            }
        };
        if order != Ordering::Equal {
            return order;
        }
    }
}

/// The directories the files `paths` lie in ([`Manifest::dirs`]), sorted, and for each the
/// first and the last name of its files there in natural order ([`Manifest::spans`]).
pub(crate) fn dirs_of(paths: &[String]) -> (Vec<String>, Vec<[String; 2]>) {
    let mut by_dir: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for p in paths {
        let (d, name) = p.rsplit_once('/').unwrap_or(("", p));
        let span = by_dir.entry(d).or_insert((name, name));
        if natural_cmp(name, span.0) == Ordering::Less {
            span.0 = name;
        }
        if natural_cmp(name, span.1) == Ordering::Greater {
            span.1 = name;
        }
    }
    by_dir
        .into_iter()
        .map(|(d, (first, last))| (d.to_string(), [first.to_string(), last.to_string()]))
        .unzip()
}

/// A manifest object's JSON document.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ManifestDoc {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// Always [`MANIFEST_VERSION`].
    pub version: u32,
    /// The entries it holds, by file path, as a state's `files` holds them.
    pub files: BTreeMap<String, StateFile>,
}

/// What a commit does about manifests ([`plan`]).
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// The manifests the new state names.
    pub manifests: Vec<Manifest>,
    /// The new manifest objects to upload before the state: key and bytes.
    pub uploads: Vec<(String, Bytes)>,
    /// The keys of the loaded state's manifests the new state does not name.
    pub retired: Vec<String>,
    /// The keys of the manifests not loaded that a merge would take in: load these, then
    /// plan again (when any is named, the rest of the plan is empty).
    pub needs_load: Vec<String>,
}

/// The level of a manifest of `size` bytes sealing at `seal`: the least `L` with `size`
/// under `seal × FANOUT^(L + 1)`, so that a manifest sealed large at once (the many
/// unchanged entries of a dataset written without manifests) joins the large ones and
/// does not hold the small ones of its level back from merging.
fn level_of(size: u64, seal: u64) -> u32 {
    let mut level = 0;
    let mut cap = seal.max(1).saturating_mul(FANOUT as u64);
    while size >= cap && cap < u64::MAX {
        level += 1;
        cap = cap.saturating_mul(FANOUT as u64);
    }
    level
}

/// An estimate of the bytes `entry` takes in a JSON map at `path` (within a few bytes).
fn entry_len(path: &str, entry: &StateFile) -> u64 {
    serde_json::to_vec(entry).map_or(0, |b| b.len() as u64) + path.len() as u64 + 4
}

/// The bytes of a manifest holding `paths`' entries from `files`.
fn encode(files: &BTreeMap<String, StateFile>, paths: &[String]) -> serde_json::Result<Vec<u8>> {
    let doc = ManifestDoc {
        format: MANIFEST_FORMAT.into(),
        version: MANIFEST_VERSION,
        files: paths
            .iter()
            .filter_map(|p| files.get(p).map(|f| (p.clone(), f.clone())))
            .collect(),
    };
    serde_json::to_vec(&doc)
}

/// What the commit of `files` (every file's new entry) on top of `old` (the loaded state's
/// entries and manifests)
/// does about manifests, with `seal` the sealing size (0: none) and the commit's
/// `generation` and `tag` naming new manifests.
///
/// - A loaded manifest stays when every file it holds keeps its entry exactly; any other
///   is retired, and the entries of its files that remain go back to the tail.
/// - The tail's entries that this commit left unchanged (not inline meta documents) are
///   sealed into a new manifest (several past [`MAX_MERGED`]) when they take `seal` bytes
///   or more, of the level its size gives ([`level_of`]): the files a commit writes are
///   the likeliest to be written again (an append's last superchunk), so they stay in the
///   tail.
/// - While [`FANOUT`] manifests share a level, they are merged into one of the next level
///   or the one its size gives, if higher (unless it would exceed [`MAX_MERGED`]).
/// - Sealing off (`seal` 0), manifests are only kept or retired.
/// - A manifest not loaded is kept: the caller loads the manifests before any change to a
///   file one may hold ([`Manifest::may_hold`]), so none of its files changed. When a merge
///   would take some in, the plan names them in [`Plan::needs_load`] and says nothing else.
///
/// # Errors
/// A message when a manifest does not encode (it always does).
pub(crate) fn plan(
    old: Option<(&BTreeMap<String, StateFile>, &[Manifest])>,
    files: &BTreeMap<String, StateFile>,
    seal: u64,
    generation: u64,
    tag: u64,
) -> Result<Plan, String> {
    let mut out = Plan::default();
    let unchanged = |p: &str| match (old.and_then(|(o, _)| o.get(p)), files.get(p)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    let mut kept: Vec<Manifest> = Vec::new();
    let old_files = old.map_or(files, |(o, _)| o);
    for m in old.map_or(&[][..], |(_, m)| m) {
        if m.kept(old_files, files) {
            kept.push(m.clone());
        } else {
            out.retired.push(m.key.clone());
        }
    }
    if seal == 0 {
        // Sealing off: no manifest is written, none merged.
        out.manifests = kept;
        return Ok(out);
    }
    let held: HashSet<&str> = kept
        .iter()
        .flat_map(|m| m.paths.iter().map(String::as_str))
        .collect();
    let mut count = 0;
    let mut new_manifest = |paths: Vec<String>, least: u32, out: &mut Plan| {
        let bytes = encode(files, &paths).map_err(|e| e.to_string())?;
        let level = least.max(level_of(bytes.len() as u64, seal));
        let key = format!("{MANIFEST_DIR}/{generation}-{tag:016x}.{count}");
        count += 1;
        let size = bytes.len() as u64;
        out.uploads.push((key.clone(), Bytes::from(bytes)));
        let (dirs, spans) = dirs_of(&paths);
        Ok::<_, String>(Manifest {
            key,
            size,
            level,
            dirs: Some(dirs),
            spans: Some(spans),
            paths,
            loaded: true,
        })
    };
    // The unchanged entries the state object would hold, with the bytes each takes.
    let sealable: Vec<(&String, u64)> = files
        .iter()
        .filter(|(p, f)| {
            !held.contains(p.as_str()) && !matches!(f, StateFile::Inline { .. }) && unchanged(p)
        })
        .map(|(p, f)| (p, entry_len(p, f)))
        .collect();
    if sealable.iter().map(|(_, n)| n).sum::<u64>() >= seal {
        // In manifests of at most MAX_MERGED bytes (or one entry).
        let (mut paths, mut size) = (Vec::new(), 0);
        for (p, n) in sealable {
            if !paths.is_empty() && size + n > MAX_MERGED {
                let m = new_manifest(std::mem::take(&mut paths), 0, &mut out)?;
                kept.push(m);
                size = 0;
            }
            paths.push(p.clone());
            size += n;
        }
        let m = new_manifest(paths, 0, &mut out)?;
        kept.push(m);
    }
    // Merges, lowest level first: a merged manifest may complete the next level's group.
    let mut level = 0;
    while let Some(top) = kept.iter().map(|m| m.level).max() {
        if level > top {
            break;
        }
        let group: Vec<usize> = (0..kept.len())
            .filter(|&i| kept[i].level == level)
            .collect();
        let size: u64 = group.iter().map(|&i| kept[i].size).sum();
        if group.len() >= FANOUT && size <= MAX_MERGED {
            let unloaded: Vec<String> = group
                .iter()
                .filter(|&&i| !kept[i].loaded)
                .map(|&i| kept[i].key.clone())
                .collect();
            if !unloaded.is_empty() {
                return Ok(Plan {
                    needs_load: unloaded,
                    ..Plan::default()
                });
            }
            let mut paths: Vec<String> = group
                .iter()
                .flat_map(|&i| kept[i].paths.iter().cloned())
                .collect();
            paths.sort();
            for &i in group.iter().rev() {
                let m = kept.remove(i);
                if out.uploads.iter().any(|(k, _)| *k == m.key) {
                    // Made by this very commit: never uploaded.
                    out.uploads.retain(|(k, _)| *k != m.key);
                } else {
                    out.retired.push(m.key);
                }
            }
            let m = new_manifest(paths, level + 1, &mut out)?;
            kept.push(m);
        }
        level += 1;
    }
    kept.sort_by(|a, b| a.key.cmp(&b.key));
    out.manifests = kept;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::State;

    fn entry(i: usize, pad: usize) -> StateFile {
        StateFile::Object {
            key: format!("data/__{i}__.bin.1-{:016x}{}", i, "0".repeat(pad)),
            len: 1000 + i as u64,
            front: None,
        }
    }

    fn files(n: usize, pad: usize) -> BTreeMap<String, StateFile> {
        (0..n)
            .map(|i| (format!("data/__{i}__.bin"), entry(i, pad)))
            .collect()
    }

    /// The commit of `new` on `old`, then `old` as the next commit loads it.
    fn commit(
        old: &State,
        new: BTreeMap<String, StateFile>,
        seal: u64,
        generation: u64,
    ) -> (State, Plan) {
        let p = plan(
            Some((&old.files, &old.manifests[..])),
            &new,
            seal,
            generation,
            7,
        )
        .unwrap();
        let mut next = State::first(new, p.manifests.clone());
        next.generation = generation;
        // Every upload decodes to the entries its manifest names.
        for m in &p.manifests {
            if let Some((_, bytes)) = p.uploads.iter().find(|(k, _)| *k == m.key) {
                let doc: ManifestDoc = serde_json::from_slice(bytes).unwrap();
                assert_eq!(doc.format, MANIFEST_FORMAT);
                assert_eq!(bytes.len() as u64, m.size);
                let paths: Vec<&String> = doc.files.keys().collect();
                assert_eq!(paths, m.paths.iter().collect::<Vec<_>>());
                for (p, f) in &doc.files {
                    assert_eq!(&next.files[p], f);
                }
            }
        }
        (next, p)
    }

    /// Changed entries stay in the state; unchanged ones past the sealing size go into a
    /// level-0 manifest; four level-0 manifests merge into one of level 1 (never uploading
    /// one made by the same commit); a change to a sealed entry retires its manifest.
    #[test]
    fn seals_merges_and_retires() {
        let mut s = State::first(files(4, 0), Vec::new());
        let (mut level0, mut merged) = (0, 0);
        for g in 4..40usize {
            let mut new = s.files.clone();
            new.insert(format!("data/__{g}__.bin"), entry(g, 0));
            let (next, p) = commit(&s, new, 200, g as u64);
            assert!(p
                .retired
                .iter()
                .all(|k| s.manifests.iter().any(|m| m.key == *k)));
            for m in &p.manifests {
                // A new file stays in the state object.
                assert!(!m.paths.contains(&format!("data/__{g}__.bin")));
            }
            level0 += p
                .manifests
                .iter()
                .filter(|m| m.level == 0 && !s.manifests.contains(m))
                .count();
            merged += p
                .manifests
                .iter()
                .filter(|m| m.level == 1 && !s.manifests.contains(m))
                .count();
            assert!(p.manifests.iter().filter(|m| m.level == 0).count() < FANOUT);
            s = next;
        }
        assert!(level0 >= FANOUT && merged >= 1, "{level0} {merged}");
        let held: Vec<&String> = s.manifests.iter().flat_map(|m| &m.paths).collect();
        let mut sorted = held.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), held.len(), "a path in two manifests");

        // A change to a file in a manifest retires that manifest alone.
        let victim = s.manifests[0].clone();
        let mut new = s.files.clone();
        new.insert(victim.paths[0].clone(), entry(999, 0));
        let p = plan(Some((&s.files, &s.manifests[..])), &new, 0, 50, 7).unwrap();
        assert_eq!(p.retired, vec![victim.key.clone()]);
        assert!(p.uploads.is_empty(), "sealing off makes none");
        assert_eq!(p.manifests.len(), s.manifests.len() - 1);
    }

    /// Many entries sealed at once make a manifest of a high level, which does not hold
    /// the small ones sealed after it back from merging: the manifests stay few.
    #[test]
    fn a_large_first_seal_does_not_stop_merges() {
        let old = State::first(files(400, 0), Vec::new());
        let (mut s, p) = commit(&old, old.files.clone(), 200, 2);
        assert_eq!(p.manifests.len(), 1);
        assert!(p.manifests[0].level >= 2, "{:?}", p.manifests[0].level);
        for g in 400..600usize {
            let mut new = s.files.clone();
            new.insert(format!("data/__{g}__.bin"), entry(g, 0));
            let (next, _) = commit(&s, new, 200, g as u64);
            s = next;
            for level in 0..8 {
                let n = s.manifests.iter().filter(|m| m.level == level).count();
                assert!(n < FANOUT, "{n} manifests of level {level} at {g}");
            }
        }
        assert!(s.manifests.len() < 3 * 4, "{}", s.manifests.len());
    }

    /// Natural order puts numbered files in number order, and is a total order (checked on
    /// every pair and triple of a set of awkward names).
    #[test]
    fn natural_order_sorts_numbers_by_value() {
        use std::cmp::Ordering::*;
        assert_eq!(natural_cmp("__9__.bin", "__10__.bin"), Less);
        assert_eq!(natural_cmp("__10__.bin", "__9__.bin"), Greater);
        assert_eq!(natural_cmp("__007__.bin", "__7__.bin"), Less);
        assert_eq!(natural_cmp("__7__.bin", "__7__.bin"), Equal);
        assert_eq!(natural_cmp("a", "a1"), Less);
        assert_eq!(natural_cmp("18446744073709551616", "9"), Greater);
        let names = [
            "",
            "0",
            "00",
            "007",
            "7",
            "10",
            "9",
            "a",
            "a1",
            "a01",
            "a10",
            "a9b",
            "a9",
            "b",
            "/",
            ":",
            "__1__.bin",
            "__10__.bin",
            "__2__.bin",
            "__2__.bin.tmp",
            "é1",
            "é01",
            "1é",
            "x99999999999999999999999",
            "x100000000000000000000000",
        ];
        for a in names {
            for b in names {
                assert_eq!(
                    natural_cmp(a, b),
                    natural_cmp(b, a).reverse(),
                    "{a:?} {b:?}"
                );
                assert_eq!(natural_cmp(a, b) == Equal, a == b, "{a:?} {b:?}");
                for c in names {
                    if natural_cmp(a, b) != Greater && natural_cmp(b, c) != Greater {
                        assert_ne!(natural_cmp(a, c), Greater, "{a:?} {b:?} {c:?}");
                    }
                }
            }
        }
    }

    /// A manifest tells from its directories and spans which paths it may hold: not the
    /// next superchunk file, nor a file of another directory; any path inside a span, and
    /// the directories above its files.
    #[test]
    fn may_hold_follows_directories_and_spans() {
        let paths: Vec<String> = (0..120)
            .map(|i| format!("data/__{i}__.bin"))
            .chain((3..9).map(|i| format!("data/x/__{i}__.bin")))
            .collect();
        let (dirs, spans) = dirs_of(&paths);
        assert_eq!(dirs, vec!["data".to_string(), "data/x".to_string()]);
        assert_eq!(
            spans[0],
            ["__0__.bin".to_string(), "__119__.bin".to_string()]
        );
        assert_eq!(spans[1], ["__3__.bin".to_string(), "__8__.bin".to_string()]);
        let m = Manifest {
            key: "manifests/1-0.0".into(),
            size: 1,
            level: 0,
            paths: Vec::new(),
            dirs: Some(dirs),
            spans: Some(spans),
            loaded: false,
        };
        for p in &paths {
            assert!(m.may_hold(p), "{p}");
        }
        for p in ["", "data", "data/x"] {
            assert!(m.may_hold(p), "{p}");
        }
        for p in [
            "data/__120__.bin",
            "data/x/__9__.bin",
            "data/x/__2__.bin",
            "meta/sizes",
        ] {
            assert!(!m.may_hold(p), "{p}");
        }
        for p in ["data/y", "data/y/__5__.bin", "data/__55__.bin/z", "meta"] {
            assert!(!m.may_hold(p), "{p}");
        }
        // Inside a span, a name it does not hold may still be there.
        assert!(m.may_hold("data/__5a__.bin"));
        let old = Manifest {
            spans: None,
            ..m.clone()
        };
        assert!(old.may_hold("data/__120__.bin"));
        assert!(!old.may_hold("meta/sizes"));
    }

    /// A manifest not loaded is kept as it is; a merge that would take some in asks for
    /// those to be loaded (not the others), and the plan made after that merges them.
    #[test]
    fn unloaded_manifests_are_kept_and_loaded_for_a_merge() {
        let mut s = State::first(files(4, 0), Vec::new());
        let mut g = 4;
        // Grow until a merged manifest and three level-0 ones wait: the next seal merges
        // the level-0 ones, and only they need loading.
        while !(s.manifests.iter().any(|m| m.level > 0)
            && s.manifests.iter().filter(|m| m.level == 0).count() == FANOUT - 1)
        {
            let mut new = s.files.clone();
            new.insert(format!("data/__{g}__.bin"), entry(g, 0));
            s = commit(&s, new, 200, g as u64).0;
            g += 1;
        }
        for m in &mut s.manifests {
            m.loaded = true;
        }
        // The same state as an open sees it: the manifests' files not in `files`.
        let mut lazy = s.clone();
        for m in &mut lazy.manifests {
            for p in std::mem::take(&mut m.paths) {
                lazy.files.remove(&p);
            }
            m.loaded = false;
        }
        let mut needed = false;
        for _ in 0..20 {
            let mut new = lazy.files.clone();
            new.insert(format!("data/__{g}__.bin"), entry(g, 0));
            let p = plan(
                Some((&lazy.files, &lazy.manifests[..])),
                &new,
                200,
                g as u64,
                7,
            )
            .unwrap();
            if !p.needs_load.is_empty() {
                assert!(p.uploads.is_empty() && p.manifests.is_empty() && p.retired.is_empty());
                // Only manifests of one level, each not loaded, FANOUT at most: the ones
                // the merge takes in, not every manifest.
                let named: Vec<&Manifest> = lazy
                    .manifests
                    .iter()
                    .filter(|m| p.needs_load.contains(&m.key))
                    .collect();
                assert_eq!(named.len(), p.needs_load.len());
                assert!(named.len() <= FANOUT && named.iter().all(|m| !m.loaded));
                assert!(named.iter().all(|m| m.level == named[0].level));
                assert!(
                    named.len() < lazy.manifests.len(),
                    "{} of {}",
                    named.len(),
                    lazy.manifests.len()
                );
                needed = true;
                break;
            }
            // Every manifest not loaded is kept, none retired.
            assert!(p.retired.is_empty(), "{:?}", p.retired);
            for m in lazy.manifests.iter().filter(|m| !m.loaded) {
                assert!(p.manifests.contains(m));
            }
            let mut next = State::first(new, p.manifests.clone());
            next.generation = g as u64;
            lazy = next;
            g += 1;
        }
        assert!(needed, "no merge came");
    }

    /// Unchanged entries past 16 MiB are sealed into several manifests, each within it.
    #[test]
    fn large_seals_split() {
        let old = State::first(files(9000, 2000), Vec::new());
        let new = old.files.clone();
        let p = plan(Some((&old.files, &old.manifests[..])), &new, 1, 2, 7).unwrap();
        assert!(p.manifests.len() >= 2, "{:?}", p.manifests.len());
        assert!(p.manifests.iter().all(|m| m.size <= MAX_MERGED + 4096));
        let total: usize = p.manifests.iter().map(|m| m.paths.len()).sum();
        assert_eq!(total, 9000);
    }
}
