//! One conformance suite for every storage backend: what the dataset code relies on from a
//! [`Storage`] (creation, positional reads and writes, lengths, truncation, atomic renames,
//! listings, removals, errors that name the path), checked the same way on each backend. A
//! new backend gets a test here that calls [`read_write`] (or [`read_only`] for a backend
//! that cannot write) before anything else uses it.

mod common;

use blz::storage::{
    read_small_file, write_file_atomic, FaultyStorage, LocalStorage, MemoryStorage, ObjectStorage,
    OpenMode, Storage,
};
use blz::Error;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

fn kind(e: &Error) -> Option<ErrorKind> {
    match e {
        Error::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

fn names_path(e: &Error, path: &Path) -> bool {
    e.to_string().contains(&path.display().to_string())
}

fn read_all(s: &dyn Storage, path: &Path) -> Vec<u8> {
    let f = s.open(path, OpenMode::Read).unwrap();
    let mut buf = vec![0; f.len().unwrap() as usize];
    f.read_at(0, &mut buf).unwrap();
    buf
}

/// Everything a writable backend must do, under `root` (an empty directory on it).
fn read_write(s: &dyn Storage, root: &Path) {
    // Directories.
    let dir = root.join("a").join("b");
    s.create_dir_all(&dir).unwrap();
    s.create_dir_all(&dir).unwrap(); // again: no error
    assert!(s.is_dir(&dir) && s.exists(&dir));
    assert!(!s.exists(&root.join("nothing")) && !s.is_dir(&root.join("nothing")));

    // Creating, writing at positions, reading back.
    let p = dir.join("f.bin");
    let f = s.open(&p, OpenMode::Create).unwrap();
    assert_eq!(f.len().unwrap(), 0);
    f.write_at(0, b"hello").unwrap();
    f.write_at(10, b"world").unwrap(); // past the end: the gap reads as zeros
    assert_eq!(f.len().unwrap(), 15);
    let mut buf = [0xffu8; 15];
    f.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"hello\0\0\0\0\0world");
    f.write_at(3, b"LO").unwrap(); // overwrite in place
    let mut two = [0u8; 2];
    f.read_at(3, &mut two).unwrap();
    assert_eq!(&two, b"LO");
    f.sync().unwrap();
    f.start_sync(0, 15).unwrap();
    assert!(!s.is_dir(&p) && s.exists(&p));
    assert_eq!(f.path(), p.as_path());

    // Several ranges at once read as each alone does, in the order asked.
    let got = f.read_ranges(&[10..15, 0..5, 4..4, 3..11]).unwrap();
    let got: Vec<&[u8]> = got.iter().map(|b| &b[..]).collect();
    assert_eq!(got, [&b"world"[..], b"helLO", b"", b"LO\0\0\0\0\0w"]);
    let e = f.read_ranges(&[0..2, 13..17]).unwrap_err();
    assert_eq!(kind(&e), Some(ErrorKind::UnexpectedEof), "{e}");

    // Reading past the end fails with UnexpectedEof and changes nothing.
    let mut past = [0u8; 4];
    let e = f.read_at(13, &mut past).unwrap_err();
    assert_eq!(kind(&e), Some(ErrorKind::UnexpectedEof), "{e}");
    assert_eq!(f.len().unwrap(), 15);

    // Truncating and extending.
    f.set_len(4).unwrap();
    assert_eq!(f.len().unwrap(), 4);
    f.set_len(6).unwrap();
    let mut six = [0xffu8; 6];
    f.read_at(0, &mut six).unwrap();
    assert_eq!(&six, b"helL\0\0");
    drop(f);

    // Opening: an existing file read-write keeps its bytes; Create truncates it.
    let rw = s.open(&p, OpenMode::ReadWrite).unwrap();
    assert_eq!(rw.len().unwrap(), 6);
    drop(rw);
    let ro = s.open(&p, OpenMode::Read).unwrap();
    assert!(
        ro.write_at(0, b"x").is_err(),
        "a file opened to read took a write"
    );
    drop(ro);
    let again = s.open(&p, OpenMode::Create).unwrap();
    assert_eq!(again.len().unwrap(), 0);
    again.write_at(0, b"fresh").unwrap();
    drop(again);

    // Missing files: errors that say so and name the path.
    let missing = dir.join("missing.bin");
    for mode in [OpenMode::Read, OpenMode::ReadWrite] {
        let e = s.open(&missing, mode).err().unwrap();
        assert_eq!(kind(&e), Some(ErrorKind::NotFound), "{e}");
        assert!(names_path(&e, &missing), "{e}");
    }

    // Listing: sorted names of files and directories, nothing else.
    s.open(&dir.join("e.bin"), OpenMode::Create).unwrap();
    s.create_dir_all(&dir.join("sub")).unwrap();
    assert_eq!(
        s.list(&dir).unwrap(),
        vec!["e.bin".to_string(), "f.bin".into(), "sub".into()]
    );
    let e = s.list(&root.join("no-dir")).unwrap_err();
    assert!(names_path(&e, &root.join("no-dir")), "{e}");

    // Renames replace the target whole.
    s.rename(&dir.join("e.bin"), &p).unwrap();
    assert!(!s.exists(&dir.join("e.bin")));
    assert_eq!(read_all(s, &p), b"");
    s.rename(&dir.join("sub"), &dir.join("moved")).unwrap();
    assert!(s.is_dir(&dir.join("moved")) && !s.exists(&dir.join("sub")));
    // A directory renamed takes everything below it along.
    let tree = dir.join("tree");
    s.create_dir_all(&tree.join("deeper")).unwrap();
    s.open(&tree.join("x.bin"), OpenMode::Create)
        .unwrap()
        .write_at(0, b"x")
        .unwrap();
    s.open(&tree.join("deeper").join("y.bin"), OpenMode::Create)
        .unwrap()
        .write_at(0, b"yy")
        .unwrap();
    let planted = dir.join("planted");
    s.rename(&tree, &planted).unwrap();
    assert!(!s.exists(&tree) && !s.exists(&tree.join("x.bin")));
    assert!(s.is_dir(&planted) && s.is_dir(&planted.join("deeper")));
    assert_eq!(
        s.list(&planted).unwrap(),
        vec!["deeper".to_string(), "x.bin".into()]
    );
    assert_eq!(read_all(s, &planted.join("x.bin")), b"x");
    assert_eq!(read_all(s, &planted.join("deeper").join("y.bin")), b"yy");
    // Listings after removals name what is left, and nothing removed.
    s.remove_file(&planted.join("x.bin")).unwrap();
    assert_eq!(s.list(&planted).unwrap(), vec!["deeper".to_string()]);
    s.remove_dir_all(&planted.join("deeper")).unwrap();
    assert!(!s.exists(&planted.join("deeper").join("y.bin")));
    assert!(s.list(&planted).unwrap().is_empty());
    s.remove_dir_all(&planted).unwrap();
    assert_eq!(
        s.list(&dir).unwrap(),
        vec!["f.bin".to_string(), "moved".into()]
    );

    // Atomic replacement of small files, and the size limit on reading them back.
    let m = root.join("meta.json");
    write_file_atomic(s, &m, b"{\"v\": 1}").unwrap();
    let before = s.stamp(&m);
    assert_eq!(
        s.stamp(&m),
        before,
        "a file's stamp stays while it is unchanged"
    );
    write_file_atomic(s, &m, b"{\"v\": 2}").unwrap();
    assert_eq!(read_small_file(s, &m, 100).unwrap(), b"{\"v\": 2}");
    if before.is_some() {
        assert_ne!(s.stamp(&m), before, "a replaced file's stamp changes");
    }
    assert_eq!(s.stamp(&root.join("nothing")), None);
    let e = read_small_file(s, &m, 3).unwrap_err();
    assert!(
        matches!(e, Error::InvalidMetadata { .. }) && names_path(&e, &m),
        "{e}"
    );
    s.sync_dir(root).unwrap();

    // Removals: gone afterwards; removing what is not there is no error.
    s.remove_file(&p).unwrap();
    s.remove_file(&p).unwrap();
    assert!(!s.exists(&p));
    s.remove_dir_all(&root.join("a")).unwrap();
    s.remove_dir_all(&root.join("a")).unwrap();
    assert!(!s.exists(&root.join("a")));
    assert_eq!(s.list(root).unwrap(), vec!["meta.json".to_string()]);

    // The exclusive lock: a second taker is refused (Locked, naming the lock file) while the
    // first guard lives, and succeeds once it is dropped.
    let l = root.join("lock");
    let held = s.lock(&l).unwrap();
    let e = s.lock(&l).err().unwrap();
    assert!(
        matches!(&e, Error::Locked { path, .. } if path == &l),
        "{e}"
    );
    drop(held);
    let again = s.lock(&l).unwrap();
    drop(again);
    s.remove_file(&l).unwrap();
}

/// What a read-only backend must do: show the tree under `root` as `read_write` left a copy
/// made by [`fill`], and refuse every change with PermissionDenied, naming the path.
fn read_only(s: &dyn Storage, root: &Path) {
    let f = root.join("d").join("f.bin");
    assert!(s.is_dir(&root.join("d")) && s.exists(&f) && !s.is_dir(&f));
    assert_eq!(s.list(root).unwrap(), vec!["d".to_string(), "meta".into()]);
    assert_eq!(read_all(s, &f), b"0123456789");
    let file = s.open(&f, OpenMode::Read).unwrap();
    let mut past = [0u8; 4];
    let e = file.read_at(8, &mut past).unwrap_err();
    assert_eq!(kind(&e), Some(ErrorKind::UnexpectedEof), "{e}");
    let got = file.read_ranges(&[7..10, 0..2, 5..5, 1..9]).unwrap();
    let got: Vec<&[u8]> = got.iter().map(|b| &b[..]).collect();
    assert_eq!(got, [&b"789"[..], b"01", b"", b"12345678"]);
    let e = file.read_ranges(&[0..1, 8..12]).unwrap_err();
    assert_eq!(kind(&e), Some(ErrorKind::UnexpectedEof), "{e}");
    let e = s.open(&root.join("missing"), OpenMode::Read).err().unwrap();
    assert_eq!(kind(&e), Some(ErrorKind::NotFound), "{e}");

    // A file opened to read takes no change (on any backend); the backend itself refuses
    // every change as not permitted.
    assert!(file.write_at(0, b"x").is_err() && file.set_len(1).is_err());
    let refused: Vec<(&str, blz::Result<()>)> = vec![
        (
            "create",
            s.open(&root.join("new"), OpenMode::Create).map(drop),
        ),
        ("open rw", s.open(&f, OpenMode::ReadWrite).map(drop)),
        ("rename", s.rename(&f, &root.join("g"))),
        ("remove_file", s.remove_file(&f)),
        ("remove_dir_all", s.remove_dir_all(&root.join("d"))),
        ("create_dir_all", s.create_dir_all(&root.join("n"))),
        ("lock", s.lock(&root.join("meta").join("lock")).map(drop)),
    ];
    for (what, r) in refused {
        let e = r.unwrap_err();
        assert_eq!(kind(&e), Some(ErrorKind::PermissionDenied), "{what}: {e}");
    }
    assert_eq!(read_all(s, &f), b"0123456789", "a refused change landed");
}

fn fill(root: &Path) {
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::create_dir_all(root.join("meta")).unwrap();
    std::fs::write(root.join("d").join("f.bin"), b"0123456789").unwrap();
}

#[test]
fn local_storage_conforms() {
    let dir = tempfile::tempdir().unwrap();
    read_write(&LocalStorage, dir.path());
    let f = dir.path().join("stamped");
    std::fs::write(&f, b"x").unwrap();
    assert!(
        LocalStorage.stamp(&f).is_some(),
        "the local backend stamps files"
    );
}

/// The in-memory backend (`memory://` URLs), on a private tree and on the process-wide one.
#[test]
fn memory_storage_conforms() {
    let s = MemoryStorage::new();
    s.create_dir_all(Path::new("memory://conformance")).unwrap();
    read_write(&s, Path::new("memory://conformance"));
    let (shared, root) = blz::storage::for_path(Path::new("memory://conformance.shared")).unwrap();
    shared.create_dir_all(&root).unwrap();
    read_write(shared.as_ref(), &root);
    let f = root.join("stamped");
    write_file_atomic(shared.as_ref(), &f, b"x").unwrap();
    let before = shared.stamp(&f).unwrap();
    write_file_atomic(shared.as_ref(), &f, b"x").unwrap();
    assert_ne!(
        shared.stamp(&f).unwrap(),
        before,
        "a replaced file has a new stamp"
    );
    blz::storage::memory::remove(&root).unwrap();
    assert!(!shared.exists(&root));
}

#[test]
fn fault_injecting_storage_conforms_until_its_crash() {
    let dir = tempfile::tempdir().unwrap();
    read_write(
        &FaultyStorage::new(Arc::new(LocalStorage), u64::MAX),
        dir.path(),
    );
}

#[test]
fn journal_view_conforms_as_a_read_only_backend() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    // A committed journal of no entries, byte for byte as `spec/journal.md` gives it: magic,
    // version 1, entry count 0, then the CRC-32 of those 16 bytes.
    let mut journal = b"BLZJ".to_vec();
    journal.extend_from_slice(&1u32.to_le_bytes());
    journal.extend_from_slice(&0u64.to_le_bytes());
    let crc = crc32fast::hash(&journal);
    journal.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(dir.path().join("meta").join("journal"), journal).unwrap();
    let local: Arc<dyn Storage> = Arc::new(LocalStorage);
    let view = blz::recovery::pending_view(&local, dir.path())
        .unwrap()
        .expect("a journal is pending");
    read_only(view.as_ref(), dir.path());
}

/// The object-store backend on one store, where `open()` makes a new handle on one dataset
/// root (as another process would open it: loading the state committed now): the suite
/// above on its overlay; a commit making it visible to a second handle; a stale handle's
/// commit refused; a large file read back through ranged reads; generation numbers; two
/// handles racing to commit; removals and a directory's rename committed; a reopen seeing
/// exactly the committed state.
fn object_storage(open: &dyn Fn() -> ObjectStorage) {
    let s = open();
    let root = s.root().to_path_buf();
    // Nothing there yet.
    assert!(!s.exists(&root) && s.state().unwrap().is_none());
    s.create_dir_all(&root).unwrap();
    read_write(&s, &root);
    // Before the commit nothing is visible elsewhere.
    let other = open();
    assert!(!other.exists(&root.join("meta.json")));
    s.publish(&root).unwrap();
    assert_eq!(s.state().unwrap().unwrap().generation, 1);
    let after = open();
    assert_eq!(after.list(&root).unwrap(), vec!["meta.json".to_string()]);
    assert_eq!(read_all(&after, &root.join("meta.json")), b"{\"v\": 2}");
    assert_eq!(after.state().unwrap().unwrap().generation, 1);
    // A publish that changes nothing commits nothing.
    after.publish(&root).unwrap();
    assert_eq!(open().state().unwrap().unwrap().generation, 1);
    // A large file goes to an object of its own, read back through ranged reads.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    write_file_atomic(&after, &root.join("d").join("big"), &big).unwrap();
    after.publish(&root).unwrap();
    // The handle opened before that commit is now stale: its commit is refused, and it
    // shows the state it loaded again.
    write_file_atomic(&other, &root.join("x"), b"x").unwrap();
    let e = other.publish(&root).unwrap_err();
    assert!(
        matches!(&e, Error::Conflict { path } if path == &root),
        "{e}"
    );
    assert!(
        !other.exists(&root.join("x")),
        "the refused change stays visible"
    );
    let last = open();
    assert_eq!(read_all(&last, &root.join("d").join("big")), big);
    let f = last
        .open(&root.join("d").join("big"), OpenMode::Read)
        .unwrap();
    let before = last.requests();
    let mut mid = [0u8; 10];
    f.read_at(150_000, &mut mid).unwrap();
    assert_eq!(&mid[..], &big[150_000..150_010]);
    assert_eq!(
        last.requests(),
        before + 1,
        "a read past the head is one request"
    );
    assert!(!last.exists(&root.join("x")));
    assert_eq!(last.state().unwrap().unwrap().generation, 2);
    // The state object is the commit, not a file of the dataset.
    s.create_dir_all(&root.join("meta")).unwrap();
    assert!(!last.list(&root).unwrap().contains(&"state".to_string()));

    // Removals and a directory's rename, committed: a reopen lists exactly what is left.
    let h = open();
    let sub = root.join("d").join("sub");
    h.create_dir_all(&sub.join("deeper")).unwrap();
    write_file_atomic(&h, &sub.join("a"), b"a").unwrap();
    write_file_atomic(&h, &sub.join("deeper").join("b"), b"b").unwrap();
    write_file_atomic(&h, &root.join("d").join("keep"), b"k").unwrap();
    h.publish(&root).unwrap();
    let h = open();
    assert_eq!(h.state().unwrap().unwrap().generation, 3);
    assert_eq!(
        h.list(&root.join("d")).unwrap(),
        vec!["big".to_string(), "keep".into(), "sub".into()]
    );
    h.remove_file(&root.join("d").join("keep")).unwrap();
    h.rename(&sub, &root.join("moved")).unwrap();
    let listing = |s: &ObjectStorage| {
        (
            s.list(&root).unwrap(),
            s.list(&root.join("d")).unwrap(),
            s.list(&root.join("moved")).unwrap_or_default(),
        )
    };
    let want = (
        vec!["d".to_string(), "meta.json".into(), "moved".into()],
        vec!["big".to_string()],
        vec!["a".to_string(), "deeper".into()],
    );
    assert_eq!(listing(&h), want);
    // Not committed: another handle still sees the old tree.
    let old = open();
    assert!(old.exists(&sub.join("a")) && !old.exists(&root.join("moved")));
    h.publish(&root).unwrap();
    let committed = common::tree(&h, &root);
    // Changes after the commit stay in the handle.
    write_file_atomic(&h, &root.join("uncommitted"), b"u").unwrap();
    h.remove_file(&root.join("moved").join("a")).unwrap();
    let reopened = open();
    assert_eq!(reopened.state().unwrap().unwrap().generation, 4);
    assert_eq!(listing(&reopened), want);
    assert!(common::tree(&reopened, &root) == committed, "reopened tree");
    assert_eq!(
        read_all(&reopened, &root.join("moved").join("deeper").join("b")),
        b"b"
    );
    assert!(!reopened.exists(&sub) && !reopened.exists(&root.join("uncommitted")));
    // A directory exists while a file lies below it: emptied and committed, it is gone.
    reopened.remove_file(&root.join("moved").join("a")).unwrap();
    reopened
        .remove_file(&root.join("moved").join("deeper").join("b"))
        .unwrap();
    reopened.publish(&root).unwrap();
    assert_eq!(
        open().list(&root).unwrap(),
        vec!["d".to_string(), "meta.json".into()]
    );

    // Two handles that loaded one state commit at once: one wins, the other gets Conflict
    // and nothing of it is visible; reopened, the loser commits on top.
    for round in 0..4 {
        let generation = open().state().unwrap().unwrap().generation;
        let handles = [open(), open()];
        let names: Vec<_> = (0..2)
            .map(|i| root.join("race").join(format!("{round}-{i}")))
            .collect();
        for (h, name) in handles.iter().zip(&names) {
            write_file_atomic(h, name, name.to_string_lossy().as_bytes()).unwrap();
        }
        let barrier = std::sync::Barrier::new(2);
        let results: Vec<blz::Result<()>> = std::thread::scope(|sc| {
            let hs: Vec<_> = handles
                .iter()
                .map(|h| {
                    let (barrier, root) = (&barrier, &root);
                    sc.spawn(move || {
                        barrier.wait();
                        h.publish(root)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won: Vec<usize> = (0..2).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(won.len(), 1, "round {round}: {results:?}");
        let (w, l) = (won[0], 1 - won[0]);
        assert!(
            matches!(&results[l], Err(Error::Conflict { path }) if path == &root),
            "{:?}",
            results[l]
        );
        assert!(!handles[l].exists(&names[l]), "the loser keeps its change");
        let now = open();
        assert_eq!(now.state().unwrap().unwrap().generation, generation + 1);
        assert_eq!(now.state().unwrap(), handles[w].state().unwrap());
        assert!(now.exists(&names[w]) && !now.exists(&names[l]));
        let retry = open();
        write_file_atomic(&retry, &names[l], b"again").unwrap();
        retry.publish(&root).unwrap();
        let now = open();
        assert_eq!(now.state().unwrap().unwrap().generation, generation + 2);
        assert_eq!(read_all(&now, &names[l]), b"again");
        assert!(now.exists(&names[w]));
    }
}

/// The object-store backend on an in-memory store (`object_store::memory::InMemory`): every
/// run, no server needed.
#[test]
fn object_storage_in_memory_conforms() {
    let store = Arc::new(object_store::memory::InMemory::new());
    object_storage(&|| ObjectStorage::in_memory(&store, "runs/conformance.blz").unwrap());
    let s = ObjectStorage::in_memory(&store, "runs/conformance.blz").unwrap();
    assert_eq!(s.root(), Path::new("memory://runs/conformance.blz"));
    // Another prefix of the same store is another dataset.
    let next = ObjectStorage::in_memory(&store, "runs/next.blz").unwrap();
    assert!(next.state().unwrap().is_none() && !next.exists(next.root()));
}

/// The same with every commit sealing the entries it leaves unchanged into a manifest
/// (`spec/object-store.md` §3, "Manifests"), merged four by four: every state past the
/// first names manifests, and the files they hold behave as any.
#[test]
fn object_storage_in_memory_with_manifests_conforms() {
    let store = Arc::new(object_store::memory::InMemory::new());
    let open = || {
        let s = ObjectStorage::in_memory(&store, "runs/manifests.blz").unwrap();
        s.set_manifest_bytes(1);
        s
    };
    object_storage(&open);
    let state = open().state().unwrap().unwrap();
    assert!(!state.manifests.is_empty(), "{state:?}");
    assert_eq!(state.version, blz::storage::object::STATE_VERSION);
}

/// The object-store backend on the test S3 server (`tests/s3/run.sh`; skipped without one),
/// without manifests and with a manifest at every commit.
#[test]
fn object_storage_on_s3_conforms() {
    let Some(url) = common::s3_url("conformance.blz") else {
        return;
    };
    object_storage(&|| ObjectStorage::open_url(&url).unwrap());
    let url = common::s3_url("conformance-manifests.blz").unwrap();
    object_storage(&|| {
        let s = ObjectStorage::open_url(&url).unwrap();
        s.set_manifest_bytes(1);
        s
    });
    assert!(!ObjectStorage::open_url(&url)
        .unwrap()
        .state()
        .unwrap()
        .unwrap()
        .manifests
        .is_empty());
    assert_eq!(
        ObjectStorage::open_url(&url).unwrap().root(),
        Path::new(&url)
    );
}
