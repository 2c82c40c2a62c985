//! [`ObjectStorage`](crate::ObjectStorage) as a [`Storage`]: the directory tree blz sees over the
//! state and the overlay.

use crate::client::not_found;
use crate::extents::Piece;
use crate::file::ObjectFile;
use crate::front::FrontCopy;
use crate::handle::held_locks;
use crate::handle::HeldLock;
use crate::handle::ObjectStorage;
use crate::keys::plain_name;
use crate::keys::OBJECT_FILE_BYTES;
use crate::shared::SharedPrefix;
use crate::shared::STAGED_PREFIX;
use crate::spool::lock_data;
use crate::spool::Data;
use crate::spool::Node;
use blz_format::error::Error;
use blz_format::error::Result;
use blz_format::storage::FrontRanges;
use blz_format::storage::LockGuard;
use blz_format::storage::OpenMode;
use blz_format::storage::SharedDir;
use blz_format::storage::Storage;
use blz_format::storage::StorageFile;
use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
impl Storage for ObjectStorage {
    fn open(&self, path: &Path, mode: OpenMode) -> Result<Box<dyn StorageFile>> {
        let key = self.key_of(path)?;
        // A create replaces a file a manifest may hold: the commit must see that file.
        if mode == OpenMode::Create || !self.tree().files.contains_key(&key) {
            self.load_if_may_hold(&key)?;
        }
        let node = {
            let mut tree = self.tree();
            match mode {
                OpenMode::Read | OpenMode::ReadWrite => tree
                    .files
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| not_found("open", path))?,
                OpenMode::Create => {
                    if tree.is_dir(&key) {
                        return Err(Error::io(
                            "create",
                            path,
                            std::io::Error::new(ErrorKind::IsADirectory, "a directory"),
                        ));
                    }
                    let node = Node::spool(path)?;
                    tree.files.insert(key, Arc::clone(&node));
                    node
                }
            }
        };
        Ok(Box::new(ObjectFile {
            node,
            backend: Arc::clone(&self.backend),
            path: path.to_path_buf(),
            writable: mode != OpenMode::Read,
            committed: Arc::clone(&self.committed),
        }))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let key = self.key_of(dir)?;
        self.load_pending()?;
        let tree = self.tree();
        if !tree.is_dir(&key) {
            return Err(not_found("list", dir));
        }
        let p = if key.is_empty() {
            String::new()
        } else {
            format!("{key}/")
        };
        let mut names = BTreeSet::new();
        let below = |k: &String| {
            k.strip_prefix(&p)
                .and_then(|r| r.split('/').next())
                .map(str::to_string)
        };
        for k in tree
            .files
            .range(p.clone()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(&p))
        {
            names.extend(below(k));
        }
        for k in tree
            .dirs
            .range(p.clone()..)
            .take_while(|k| k.starts_with(&p))
        {
            names.extend(below(k));
        }
        // The state object is the commit, not a file of the dataset.
        if key == self.rel_to_bucket("meta") {
            names.remove("state");
        }
        Ok(names.into_iter().filter(|n| !n.is_empty()).collect())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let (f, t) = (self.key_of(from)?, self.key_of(to)?);
        self.load_if_may_hold(&f)?;
        self.load_if_may_hold(&t)?;
        let mut tree = self.tree();
        if let Some(node) = tree.files.remove(&f) {
            tree.files.insert(t, node);
            return Ok(());
        }
        if !tree.is_dir(&f) || f.is_empty() {
            return Err(not_found("rename", from));
        }
        let (fp, tp) = (format!("{f}/"), format!("{t}/"));
        // A directory replaces a directory whole.
        tree.files.retain(|k, _| !k.starts_with(&tp));
        tree.dirs.retain(|k| !k.starts_with(&tp) && *k != t);
        let moved: Vec<String> = tree
            .files
            .keys()
            .filter(|k| k.starts_with(&fp))
            .cloned()
            .collect();
        for k in moved {
            if let Some(n) = tree.files.remove(&k) {
                tree.files.insert(format!("{tp}{}", &k[fp.len()..]), n);
            }
        }
        let dirs: Vec<String> = tree
            .dirs
            .iter()
            .filter(|k| k.starts_with(&fp) || **k == f)
            .cloned()
            .collect();
        for k in dirs {
            tree.dirs.remove(&k);
            let nk = if k == f {
                t.clone()
            } else {
                format!("{tp}{}", &k[fp.len()..])
            };
            tree.dirs.insert(nk);
        }
        tree.dirs.insert(t);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        self.load_if_may_hold(&key)?;
        self.tree().files.remove(&key);
        Ok(())
    }

    fn remove_dir_all(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        self.load_if_may_hold(&key)?;
        let p = format!("{key}/");
        let mut tree = self.tree();
        tree.files.retain(|k, _| !k.starts_with(&p));
        tree.dirs.retain(|k| !k.starts_with(&p) && *k != key);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let key = self.key_of(path)?;
        self.load_if_may_hold(&key)?;
        let mut tree = self.tree();
        if tree.files.contains_key(&key) {
            return Err(Error::io(
                "create directory",
                path,
                std::io::Error::new(ErrorKind::AlreadyExists, "a file"),
            ));
        }
        if !key.is_empty() {
            tree.dirs.insert(key);
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let Ok(key) = self.key_of(path) else {
            return false;
        };
        self.found_or_loaded(&key, |tree| {
            tree.files.contains_key(&key) || tree.is_dir(&key)
        })
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.key_of(path)
            .is_ok_and(|k| self.found_or_loaded(&k, |tree| tree.is_dir(&k)))
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<LockGuard> {
        // Only in this process: across processes, the conditional commit is what keeps two
        // writers apart (the second gets `Conflict`).
        let mut held = held_locks();
        if !held.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
                holder: Some(std::process::id()),
            });
        }
        Ok(Box::new(HeldLock(path.to_path_buf())))
    }

    fn concurrent_reads(&self) -> Option<usize> {
        Some(self.backend.read_tuning().0.concurrency)
    }

    fn read_part_size(&self) -> Option<u64> {
        Some(self.backend.read_tuning().0.part_size)
    }

    fn file_bytes(&self) -> Option<u64> {
        Some(OBJECT_FILE_BYTES)
    }

    fn publish(&self, root: &Path) -> Result<()> {
        self.publish_with_front(root, &|_| None)
    }

    fn publish_with_front(&self, root: &Path, front: &FrontRanges<'_>) -> Result<()> {
        if root == self.backend.root.as_path() {
            self.publish_root(front)
        } else {
            Ok(())
        }
    }

    fn commits_by_publish(&self) -> bool {
        true
    }

    fn discard_unpublished(&self, root: &Path) {
        if root == self.backend.root.as_path() {
            self.reset_tree();
            self.forget_draft();
        }
    }

    fn shared_dir(&self, root: &Path, id: &str) -> Result<Option<Arc<dyn SharedDir>>> {
        // A staged create builds at `<root>.tmp-build`, which is never uploaded: the
        // session lies under the dataset's own prefix, where its state will name the files.
        let _ = root;
        let rel = format!("{STAGED_PREFIX}/{id}");
        if !plain_name(id) {
            return Err(Error::InvalidArgument(format!(
                "{id:?} is not a plain session name"
            )));
        }
        Ok(Some(Arc::new(SharedPrefix {
            backend: self.backend.below(&rel),
        })))
    }

    fn adopt(
        &self,
        dir: &dyn SharedDir,
        name: &str,
        size: u64,
        blocks: Option<&str>,
        path: &Path,
    ) -> Result<()> {
        let location = dir.location();
        let rel_dir = location
            .strip_prefix(&self.backend.root)
            .ok()
            .and_then(Path::to_str)
            .filter(|r| r.starts_with(STAGED_PREFIX))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{}: not a shared directory of {}",
                    location.display(),
                    self.backend.root.display()
                ))
            })?;
        if !plain_name(name) {
            return Err(Error::InvalidArgument(format!(
                "{name:?} is not a plain file name"
            )));
        }
        let key: Arc<str> = Arc::from(format!("{rel_dir}/{name}").as_str());
        let pieces = if size > 0 {
            vec![Piece {
                key,
                size,
                at: 0,
                len: size,
            }]
        } else {
            Vec::new()
        };
        let node = Node::new(Data::Remote {
            pieces,
            len: size,
            head: None,
            front: None,
        });
        // The front the state keeps for it (as for a file this handle uploads): read now,
        // through the object, so that readers of the commit open it with no request.
        if let Some(front) = self.read_front(path, &node, &blz_format::blpk::front_ranges)? {
            let set = |copy: Arc<FrontCopy>| {
                if let Data::Remote { front: f, .. } = &mut *lock_data(&node) {
                    *f = Some(copy);
                }
            };
            set(FrontCopy::new(front.clone()));
            if let Some(b) = blocks {
                if let Some(copy) = self.worker_index(dir, b, path, &node, front, size)? {
                    set(copy);
                }
            }
        }
        let key = self.key_of(path)?;
        // It replaces a file a manifest may hold: the commit must see that file.
        self.load_if_may_hold(&key)?;
        let mut tree = self.tree();
        if tree.is_dir(&key) {
            return Err(Error::io(
                "create",
                path,
                std::io::Error::new(ErrorKind::IsADirectory, "a directory"),
            ));
        }
        tree.files.insert(key, node);
        Ok(())
    }
}
