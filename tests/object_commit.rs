//! The commit of a dataset on an object store when the conditional write of its state object
//! fails (`spec/object-store.md` §4): a write that took effect but whose answer was lost (a
//! timeout, or a retry that finds the state changed by that very write) is a commit, recognised
//! by the write id it stored; a write that did not take effect is the error (or the conflict)
//! it is, and nothing of it is visible. The faults come from an `ObjectStore` wrapping the
//! in-memory store, so these run every time, with no server. Garbage collection, which rests on
//! the store's times only, is checked here too.

#[macro_use]
mod forward;

use blz::storage::object::{collect_garbage, CLOCK_PROBE, EARLIER_WRITE_IDS, STATE_KEY};
use blz::storage::{write_file_atomic, ObjectStorage, OpenMode, Storage};
use blz::{CreateOptions, DType, Dataset, Error, Mode};
use futures::executor::block_on;
use ndarray::Array1;
use object_store::memory::InMemory;
use object_store::path::Path as OPath;
use object_store::{
    GetOptions, GetResult, ObjectMeta, ObjectStore, PutMode, PutOptions, PutPayload, PutResult,
};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the next conditional write of the state object meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// It is performed, then its answer is lost: a timeout.
    LoseAnswer,
    /// It is performed, its answer is lost, and the client's retry is refused (412): the
    /// state is no longer the one it was conditioned on (this very write changed it).
    RetryRefused,
    /// It is performed, its answer is lost, and before the writer looks, another writer
    /// commits on top of it.
    LoseAnswerThenAnotherCommits,
    /// It fails (a timeout) without being performed.
    FailBefore,
}

/// The in-memory store, with one [`Fault`] armed for the next conditional PUT.
#[derive(Debug)]
struct Flaky {
    inner: Arc<InMemory>,
    prefix: String,
    next: Mutex<Option<Fault>>,
}

impl Flaky {
    fn new(prefix: &str) -> Arc<Flaky> {
        Arc::new(Flaky {
            inner: Arc::new(InMemory::new()),
            prefix: prefix.to_string(),
            next: Mutex::new(None),
        })
    }

    fn arm(&self, f: Fault) {
        *self.next.lock().unwrap() = Some(f);
    }

    /// A handle on the dataset, as a process would open it.
    fn open(self: &Arc<Flaky>) -> ObjectStorage {
        let store: Arc<dyn ObjectStore> = Arc::clone(self) as Arc<dyn ObjectStore>;
        ObjectStorage::new(store, PathBuf::from("memory://"), &self.prefix).unwrap()
    }

    /// A handle that goes around the faults.
    fn open_plain(&self) -> ObjectStorage {
        ObjectStorage::in_memory(&self.inner, &self.prefix).unwrap()
    }
}

fn timeout() -> object_store::Error {
    object_store::Error::Generic {
        store: "flaky",
        source: Box::new(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no answer (test fault)",
        )),
    }
}

forwarding_object_store!(Flaky {
    async fn put_opts(
        &self,
        location: &OPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let fault = if matches!(opts.mode, PutMode::Overwrite) {
            None
        } else {
            self.next.lock().unwrap().take()
        };
        match fault {
            None => self.inner.put_opts(location, payload, opts).await,
            Some(Fault::FailBefore) => Err(timeout()),
            Some(Fault::LoseAnswer) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(timeout())
            }
            Some(Fault::RetryRefused) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(object_store::Error::Precondition {
                    path: location.to_string(),
                    source: "the retry's If-Match no longer holds (test fault)".into(),
                })
            }
            Some(Fault::LoseAnswerThenAnotherCommits) => {
                self.inner.put_opts(location, payload, opts).await?;
                // Another writer, on a thread of its own (blz blocks on its runtime there).
                let (inner, prefix) = (Arc::clone(&self.inner), self.prefix.clone());
                std::thread::spawn(move || {
                    let other = ObjectStorage::in_memory(&inner, &prefix).unwrap();
                    let root = other.root().to_path_buf();
                    write_file_atomic(&other, &root.join("other"), b"other").unwrap();
                    other.publish(&root).unwrap();
                })
                .join()
                .unwrap();
                Err(timeout())
            }
        }
    }

    async fn get_opts(
        &self,
        location: &OPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
});

fn read_all(s: &dyn Storage, path: &Path) -> Vec<u8> {
    let f = s.open(path, OpenMode::Read).unwrap();
    let mut buf = vec![0; f.len().unwrap() as usize];
    f.read_at(0, &mut buf).unwrap();
    buf
}

/// A dataset root with one committed file, `a`: generation 1.
fn committed_once(flaky: &Arc<Flaky>) -> ObjectStorage {
    let s = flaky.open();
    let root = s.root().to_path_buf();
    s.create_dir_all(&root).unwrap();
    write_file_atomic(&s, &root.join("a"), b"a").unwrap();
    s.publish(&root).unwrap();
    assert_eq!(s.state().unwrap().unwrap().generation, 1);
    s
}

/// A commit whose answer is lost (a timeout), or whose retry is refused because the lost
/// attempt changed the state, is a commit: the writer reports success, every handle sees it,
/// and the writer's next commit goes on from it. The same with a manifest (sealing at 1 byte:
/// the entry of `a`, which the commit leaves unchanged, goes into one): the read-back needs
/// only the state object's write ids, so it does not fetch the manifests.
#[test]
fn a_commit_whose_answer_is_lost_is_committed() {
    for (seal, manifests) in [(0, 0), (1, 1)] {
        for fault in [Fault::LoseAnswer, Fault::RetryRefused] {
            let flaky = Flaky::new(&format!("runs/lost-{seal}.blz"));
            let s = committed_once(&flaky);
            s.set_manifest_bytes(seal);
            let root = s.root().to_path_buf();
            write_file_atomic(&s, &root.join("b"), b"b").unwrap();
            flaky.arm(fault);
            let before = s.requests();
            s.publish(&root)
                .unwrap_or_else(|e| panic!("{fault:?}: reported {e}"));
            // The upload of `b` (and of the manifest), the conditional write, the state read
            // back.
            assert_eq!(s.requests(), before + 3 + manifests as u64, "{fault:?}");
            let now = flaky.open_plain();
            assert_eq!(now.state().unwrap().unwrap().generation, 2, "{fault:?}");
            assert_eq!(
                now.state().unwrap().unwrap().manifests.len(),
                manifests,
                "{fault:?}"
            );
            assert_eq!(now.state().unwrap(), s.state().unwrap(), "{fault:?}");
            assert_eq!(read_all(&now, &root.join("a")), b"a");
            assert_eq!(read_all(&now, &root.join("b")), b"b");
            // The handle kept the version it read back: its next commit is not refused.
            write_file_atomic(&s, &root.join("c"), b"c").unwrap();
            s.publish(&root).unwrap();
            let now = flaky.open_plain();
            assert_eq!(now.state().unwrap().unwrap().generation, 3, "{fault:?}");
            assert!(now.exists(&root.join("b")) && now.exists(&root.join("c")));
        }
    }
}

/// A create (If-None-Match) whose answer is lost is a create.
#[test]
fn a_create_whose_answer_is_lost_is_committed() {
    for fault in [Fault::LoseAnswer, Fault::RetryRefused] {
        let flaky = Flaky::new("runs/new.blz");
        let s = flaky.open();
        let root = s.root().to_path_buf();
        s.create_dir_all(&root).unwrap();
        write_file_atomic(&s, &root.join("a"), b"a").unwrap();
        flaky.arm(fault);
        s.publish(&root)
            .unwrap_or_else(|e| panic!("{fault:?}: reported {e}"));
        assert_eq!(flaky.open_plain().state().unwrap().unwrap().generation, 1);
        assert_eq!(read_all(&flaky.open_plain(), &root.join("a")), b"a");
    }
}

/// A conditional write that fails without taking effect is reported as the error it is (not
/// a conflict, not a success); nothing of the change is visible, the handle shows the state
/// it loaded, and committing again succeeds.
#[test]
fn a_commit_that_fails_before_it_is_performed_is_an_error() {
    let flaky = Flaky::new("runs/failed.blz");
    let s = committed_once(&flaky);
    let root = s.root().to_path_buf();
    write_file_atomic(&s, &root.join("b"), b"b").unwrap();
    flaky.arm(Fault::FailBefore);
    let e = s.publish(&root).unwrap_err();
    assert!(
        matches!(&e, Error::Io { op: "commit", path, .. } if path == &root.join(STATE_KEY)),
        "{e:?}"
    );
    assert!(e.to_string().contains("no answer (test fault)"), "{e}");
    let now = flaky.open_plain();
    assert_eq!(now.state().unwrap().unwrap().generation, 1);
    assert!(!now.exists(&root.join("b")));
    assert!(
        !s.exists(&root.join("b")),
        "the failed change stays visible"
    );
    write_file_atomic(&s, &root.join("b"), b"again").unwrap();
    s.publish(&root).unwrap();
    assert_eq!(read_all(&flaky.open_plain(), &root.join("b")), b"again");
}

/// A stale writer is refused (`Conflict`), read-back or not: its write id is not in the
/// state another writer committed.
#[test]
fn a_stale_writer_still_gets_a_conflict() {
    let flaky = Flaky::new("runs/stale.blz");
    let s = committed_once(&flaky);
    let root = s.root().to_path_buf();
    let stale = flaky.open();
    write_file_atomic(&s, &root.join("b"), b"b").unwrap();
    s.publish(&root).unwrap();
    write_file_atomic(&stale, &root.join("x"), b"x").unwrap();
    let e = stale.publish(&root).unwrap_err();
    assert!(
        matches!(&e, Error::Conflict { path } if path == &root),
        "{e}"
    );
    let now = flaky.open_plain();
    assert!(now.exists(&root.join("b")) && !now.exists(&root.join("x")));
}

/// A commit that took effect and was at once replaced by another writer's, before its
/// writer read the state back, is still reported as committed (its write id is among the
/// replacing state's earlier ones); the writer's handle, whose version is unknown, refuses
/// its next commit as stale without a request.
#[test]
fn a_lost_answer_then_another_commit_is_committed_and_stale() {
    let flaky = Flaky::new("runs/superseded.blz");
    let s = committed_once(&flaky);
    let root = s.root().to_path_buf();
    write_file_atomic(&s, &root.join("b"), b"b").unwrap();
    flaky.arm(Fault::LoseAnswerThenAnotherCommits);
    s.publish(&root).unwrap();
    let now = flaky.open_plain();
    assert_eq!(now.state().unwrap().unwrap().generation, 3);
    assert!(now.exists(&root.join("b")) && now.exists(&root.join("other")));
    write_file_atomic(&s, &root.join("c"), b"c").unwrap();
    let before = s.requests();
    let e = s.publish(&root).unwrap_err();
    assert!(
        matches!(&e, Error::Conflict { path } if path == &root),
        "{e}"
    );
    assert_eq!(
        s.requests(),
        before,
        "a commit known to be stale made requests"
    );
    assert!(!flaky.open_plain().exists(&root.join("c")));
}

/// Every commit stores a fresh write id of 32 hexadecimal digits and keeps the last
/// [`EARLIER_WRITE_IDS`] before it.
#[test]
fn write_ids_are_fresh_and_the_earlier_ones_bounded() {
    let flaky = Flaky::new("runs/ids.blz");
    let s = committed_once(&flaky);
    let root = s.root().to_path_buf();
    let mut seen = vec![s.state().unwrap().unwrap().write_id.unwrap()];
    for i in 0..EARLIER_WRITE_IDS + 5 {
        write_file_atomic(&s, &root.join("n"), i.to_string().as_bytes()).unwrap();
        s.publish(&root).unwrap();
        let st = flaky.open_plain().state().unwrap().unwrap();
        let id = st.write_id.clone().unwrap();
        assert!(
            id.len() == 32
                && id
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{id}"
        );
        assert!(!seen.contains(&id), "write id {id} drawn twice");
        let keep = seen.len().min(EARLIER_WRITE_IDS);
        assert_eq!(st.earlier_write_ids, seen[seen.len() - keep..].to_vec());
        seen.push(id);
    }
}

/// Through a dataset: an append whose commit lost its answer is appended, once, and the
/// writer goes on appending.
#[test]
fn an_append_whose_commit_lost_its_answer_is_appended() {
    let flaky = Flaky::new("runs/ds.blz");
    let s = Arc::new(flaky.open());
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(vec![100]),
        superchunksize: Some(4),
        ..Default::default()
    };
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0], &o).unwrap();
    let a = Array1::from_iter(0..1000i64).into_dyn();
    ds.append(&a.view()).unwrap();
    flaky.arm(Fault::LoseAnswer);
    ds.append(&a.view()).unwrap();
    ds.append(&a.view()).unwrap();
    let r = Dataset::open_in(Arc::new(flaky.open_plain()), &root, Mode::ReadOnly).unwrap();
    let got: Vec<i64> = r.read::<i64>().unwrap().into_iter().collect();
    let want: Vec<i64> = (0..3).flat_map(|_| 0..1000i64).collect();
    assert_eq!(got, want);
}

/// The state object as JSON, straight from the store.
fn raw_state(store: &InMemory, prefix: &str) -> serde_json::Value {
    use object_store::ObjectStoreExt;
    let loc = OPath::from(format!("{prefix}/{STATE_KEY}"));
    let bytes = block_on(async { store.get(&loc).await.unwrap().bytes().await.unwrap() });
    serde_json::from_slice(&bytes).unwrap()
}

/// Replaces the state object (no condition), as a writer would have written it.
fn put_raw(store: &InMemory, key: &str, bytes: Vec<u8>) {
    use object_store::ObjectStoreExt;
    let loc = OPath::from(key);
    block_on(async { store.put(&loc, bytes.into()).await.unwrap() });
}

/// Garbage collection compares the store's times only: a retired entry written by a writer
/// whose clock is an hour behind is kept for the grace all the same (the rule that trusted
/// writers' clocks deleted it at once); orphans go by their Last-Modified against the
/// store's "now" (a probe object, deleted afterwards); the next writer stamps retired
/// entries with the store time of the state it loaded.
#[test]
fn garbage_collection_trusts_only_the_store_clock() {
    let prefix = "runs/gc.blz";
    let store = Arc::new(InMemory::new());
    let s = ObjectStorage::in_memory(&store, prefix).unwrap();
    let root = s.root().to_path_buf();
    s.create_dir_all(&root).unwrap();
    let big = vec![7u8; 40_000]; // not inline: an object of its own
    write_file_atomic(&s, &root.join("a"), &big).unwrap();
    s.publish(&root).unwrap();
    write_file_atomic(&s, &root.join("a"), &big[1..]).unwrap();
    s.publish(&root).unwrap();
    // The commit that retired the first object was made by a writer whose clock ran an
    // hour behind.
    let mut raw = raw_state(&store, prefix);
    let retired = raw["retired"].as_array_mut().unwrap();
    assert_eq!(retired.len(), 1, "{raw}");
    assert_eq!(retired[0]["generation"], 2);
    assert!(retired[0].get("stored_by").is_none(), "{raw}");
    let at = retired[0]["at"].as_u64().unwrap();
    retired[0]["at"] = (at - 3600).into();
    let old_key = retired[0]["key"].as_str().unwrap().to_string();
    put_raw(
        &store,
        &format!("{prefix}/{STATE_KEY}"),
        serde_json::to_vec(&raw).unwrap(),
    );
    // An orphan, uploaded now.
    put_raw(&store, &format!("{prefix}/orphan.9-00"), b"o".to_vec());
    let gc = |grace: u64| {
        let h = ObjectStorage::in_memory(&store, prefix).unwrap();
        collect_garbage(&h, Duration::from_secs(grace)).unwrap()
    };
    let kept = gc(600);
    assert!(kept.deleted.is_empty(), "{kept:?}");
    assert_eq!(kept.kept, 2, "{kept:?}");
    // The probe is gone: only the state and the objects are there.
    let listed = list_keys(&store, prefix);
    assert!(
        !listed.iter().any(|k| k.contains(CLOCK_PROBE)),
        "{listed:?}"
    );
    assert!(listed.contains(&format!("{prefix}/{old_key}")));
    // A writer committing on top stamps the entry with the store time of the state it
    // loaded; the stamp is no later than the store's now.
    let w = ObjectStorage::in_memory(&store, prefix).unwrap();
    write_file_atomic(&w, &root.join("b"), b"b").unwrap();
    w.publish(&root).unwrap();
    let st = ObjectStorage::in_memory(&store, prefix)
        .unwrap()
        .state()
        .unwrap()
        .unwrap();
    let stamped = st.retired.iter().find(|r| r.key == old_key).unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        stamped
            .stored_by
            .is_some_and(|t| t <= wall && t + 60 > wall),
        "{st:?}"
    );
    assert!(gc(600).deleted.is_empty());
    // With no grace, both go, and the retired list is pruned.
    let gone = gc(0);
    let mut deleted = gone.deleted.clone();
    deleted.sort();
    assert_eq!(deleted, vec![old_key.clone(), "orphan.9-00".to_string()]);
    let st = ObjectStorage::in_memory(&store, prefix)
        .unwrap()
        .state()
        .unwrap()
        .unwrap();
    assert!(st.retired.is_empty(), "{st:?}");
    assert!(!list_keys(&store, prefix)
        .iter()
        .any(|k| k.contains(CLOCK_PROBE)));
    let r = ObjectStorage::in_memory(&store, prefix).unwrap();
    assert_eq!(read_all(&r, &root.join("a")), &big[1..]);
}

fn list_keys(store: &InMemory, prefix: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let p = OPath::from(prefix);
    let metas: Vec<ObjectMeta> = block_on(store.list(Some(&p)).try_collect()).unwrap();
    metas.into_iter().map(|m| m.location.to_string()).collect()
}
