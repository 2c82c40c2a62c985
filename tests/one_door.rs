//! Every change reaches the store through one door: `engine::root::commit_point`, the only
//! caller of `Storage::publish` (on an object store, the conditional write of the state
//! object that makes a change visible). Checked twice: in the sources (no other call of
//! `publish` with an argument anywhere in the library, the CLI or the binding), and by
//! running every kind of change through a storage that records what reaches it.

use blz::layer::{ColumnDef, LayerSchema, LayerWriter, LeafKind, Value};
use blz::storage::{FrontRanges, LocalStorage, OpenMode, Storage, StorageFile, StorageWrapper};
use blz::table::{Field, TableOptions, Values};
use blz::{CreateOptions, DType, Dataset, Mode, Table};
use ndarray::{s, Array1};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The `.rs` files under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Calls of `Storage::publish` (a `publish(` with an argument; `Staging::publish()` takes
/// none) outside the storage backends, which define it and forward it to the storage they
/// wrap.
#[test]
fn only_commit_point_calls_publish() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    assert!(here.join("crates/blz-format/src/storage").is_dir());
    for d in [
        "src",
        "crates/blz-format/src",
        "crates/blz-object/src",
        "cli/src",
        "python/src",
    ] {
        if here.join(d).is_dir() {
            sources(&here.join(d), &mut files);
        }
    }
    let mut calls = Vec::new();
    for f in &files {
        if f.starts_with(here.join("crates/blz-format/src/storage"))
            || f.starts_with(here.join("crates/blz-object/src"))
        {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let mut in_commit_point = false;
        for (i, line) in text.lines().enumerate() {
            if line.contains("fn commit_point(") {
                in_commit_point = true;
            } else if line.starts_with("pub") || line.starts_with("fn ") || line.starts_with("}") {
                in_commit_point = line.contains("fn commit_point(");
            }
            let code = line.split("//").next().unwrap_or("");
            let call = ["publish(", "publish_with_front("]
                .into_iter()
                .find_map(|name| code.find(name).map(|at| (at, name)));
            if let Some((at, name)) = call {
                let rest = &code[at + name.len()..];
                let is_storage_call = !rest.trim_start().starts_with(')')
                    && !code.contains("fn publish(")
                    && !code.contains("fn publish_with_front(")
                    && !code.contains("fn commit_point(");
                if is_storage_call {
                    calls.push((f.clone(), i + 1, line.trim().to_string(), in_commit_point));
                }
            }
        }
    }
    let outside: Vec<_> = calls.iter().filter(|c| !c.3).collect();
    assert!(
        outside.is_empty(),
        "Storage::publish called outside engine::root::commit_point: {outside:#?}"
    );
    assert_eq!(
        calls.len(),
        1,
        "commit_point calls publish once: {calls:#?}"
    );
}

/// A storage that forwards to another and records every publish, and every change of a
/// directory entry, in order.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn Storage>,
    events: Mutex<Vec<String>>,
}

impl Recording {
    fn new() -> Arc<Recording> {
        Arc::new(Recording {
            inner: Arc::new(LocalStorage),
            events: Mutex::new(Vec::new()),
        })
    }
    fn note(&self, e: String) {
        self.events.lock().unwrap().push(e);
    }
    /// The events since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
    fn publishes(&self) -> usize {
        self.take()
            .iter()
            .filter(|e| e.starts_with("publish"))
            .count()
    }
}

impl StorageWrapper for Recording {
    fn inner(&self) -> &dyn Storage {
        &*self.inner
    }
    fn open(&self, path: &Path, mode: OpenMode) -> blz::Result<Box<dyn StorageFile>> {
        if mode != OpenMode::Read {
            self.note(format!("open {mode:?} {}", path.display()));
        }
        self.inner.open(path, mode)
    }
    fn rename(&self, from: &Path, to: &Path) -> blz::Result<()> {
        self.note(format!("rename {}", to.display()));
        self.inner.rename(from, to)
    }
    fn exchange(&self, a: &Path, b: &Path) -> blz::Result<()> {
        self.note(format!("exchange {}", b.display()));
        self.inner.exchange(a, b)
    }
    fn publish_with_front(&self, root: &Path, front: &FrontRanges<'_>) -> blz::Result<()> {
        self.note(format!("publish {}", root.display()));
        self.inner.publish_with_front(root, front)
    }
}

/// Every kind of change to every kind of dataset is published once, at its end; reads are
/// never published.
#[test]
fn every_change_is_published_once_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Recording::new();
    let st: Arc<dyn Storage> = rec.clone();

    // An array: create, append, write, resize, attributes, compact.
    let p = dir.path().join("a.blz");
    let opts = CreateOptions {
        chunkshape: Some(vec![10]),
        superchunksize: Some(4),
        slack: 0,
        ..Default::default()
    };
    let mut ds = Dataset::create_in(Arc::clone(&st), &p, DType::I64, &[0], &opts).unwrap();
    let ev = rec.take();
    assert_eq!(
        ev.iter().filter(|e| e.starts_with("publish")).count(),
        1,
        "create: {ev:#?}"
    );
    ds.append(
        &Array1::from((0..95i64).collect::<Vec<_>>())
            .into_dyn()
            .view(),
    )
    .unwrap();
    let ev = rec.take();
    assert_eq!(
        ev.last().map(|e| e.starts_with("publish")),
        Some(true),
        "append ends with its publish: {ev:?}"
    );
    assert_eq!(ev.iter().filter(|e| e.starts_with("publish")).count(), 1);
    ds.write_slice(s![5..25], &Array1::from(vec![7i64; 20]).into_dyn().view())
        .unwrap();
    assert_eq!(rec.publishes(), 1, "write");
    ds.resize(50).unwrap();
    assert_eq!(rec.publishes(), 1, "resize");
    ds.set_attr("unit", serde_json::json!("m")).unwrap();
    assert_eq!(rec.publishes(), 1, "attributes");
    ds.compact().unwrap();
    assert_eq!(rec.publishes(), 1, "compact");
    let _ = ds.read::<i64>().unwrap();
    let _ = ds.attrs().unwrap();
    let _ = ds.verify(|_, _| {});
    drop(ds);
    let r = Dataset::open_in(Arc::clone(&st), &p, Mode::ReadOnly).unwrap();
    let _ = r.read::<i64>().unwrap();
    assert_eq!(rec.publishes(), 0, "reads and opens publish nothing");
    drop(r);

    // A table: create, append, attributes, compact.
    let tp = dir.path().join("t.blz");
    let fields = vec![Field::new("x", DType::F64), Field::varstr("name")];
    let mut t = Table::create_in(Arc::clone(&st), &tp, fields, &TableOptions::default()).unwrap();
    assert_eq!(rec.publishes(), 1, "table create");
    t.append(&[
        ("x", Values::from_slice(&[1.0f64, 2.0, 3.0])),
        ("name", Values::strings(&["a", "b", "c"])),
    ])
    .unwrap();
    assert_eq!(rec.publishes(), 1, "table append");
    t.set_attrs(serde_json::Map::new()).unwrap();
    assert_eq!(rec.publishes(), 1, "table attributes");
    t.compact().unwrap();
    assert_eq!(rec.publishes(), 1, "table compact");
    drop(t);

    // A layer: built once.
    let lp = dir.path().join("l.blz");
    let schema = LayerSchema::new(vec![ColumnDef::new("k", LeafKind::Fixed(DType::I64))]);
    let mut w = LayerWriter::create_in(Arc::clone(&st), &lp, schema).unwrap();
    for k in 0..100i64 {
        w.push(&[Value::Int(k)], None).unwrap();
    }
    w.finish().unwrap();
    assert_eq!(rec.publishes(), 1, "layer build");
    // Through the one entrance, any kind, read-only: nothing published.
    for path in [&p, &tp, &lp] {
        let d = blz::open_in(Arc::clone(&st), path, Mode::ReadOnly).unwrap();
        assert_eq!(d.path(), path.as_path());
    }
    assert_eq!(rec.publishes(), 0);
}
