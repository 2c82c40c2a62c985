//! The in-memory object store behind a wrapper that records every GET and sends each
//! answer in small frames, as a server's answer streams in, and the same 2-D dataset on it
//! and on a local disk: shared by the object-store read tests. Each test binary uses its
//! own subset, hence the `dead_code` allowance.
#![allow(dead_code)]

#[path = "../forward/mod.rs"]
#[macro_use]
mod forward;

use blz::storage::ObjectStorage;
use blz::{CreateOptions, DType, Dataset, Selection};
use futures::StreamExt;
use ndarray::{Array2, ArrayD};
use object_store::memory::InMemory;
use object_store::path::Path as OPath;
use object_store::{
    GetOptions, GetRange, GetResult, ObjectStore, PutOptions, PutPayload, PutResult,
};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The in-memory store, recording every GET (the object's key and the range asked), and
/// failing the GETs of objects whose key holds `fail` when it is set.
#[derive(Debug)]
pub struct Recording {
    pub inner: Arc<InMemory>,
    /// The dataset's prefix: each test its own, as the in-process lock of a dataset is
    /// held by its path.
    pub prefix: String,
    pub gets: Mutex<Vec<(String, Option<Range<u64>>)>>,
    /// Every PUT: the object's key and the bytes sent.
    pub puts: Mutex<Vec<(String, u64)>>,
    pub fail: Mutex<Option<String>>,
    /// Every answer comes in frames of this many bytes (a server's answer streams in).
    pub frame: usize,
    /// When set, an answer stops after its first half until the flag is raised (or 10 s
    /// have passed), and `rest_sent` is raised when the rest goes.
    pub hold: Mutex<Option<Arc<std::sync::atomic::AtomicBool>>>,
    pub rest_sent: Arc<std::sync::atomic::AtomicBool>,
    /// When set, every answer waits this long before it starts (a server far away).
    pub delay: Mutex<Option<std::time::Duration>>,
    /// GETs in flight now (asked, answer not yet all sent), and the most seen at once.
    pub in_flight: Arc<std::sync::atomic::AtomicUsize>,
    pub most_in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

impl Recording {
    pub fn new() -> Arc<Recording> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Arc::new(Recording {
            inner: Arc::new(InMemory::new()),
            prefix: format!("runs/ds{n}.blz"),
            gets: Mutex::default(),
            puts: Mutex::default(),
            fail: Mutex::default(),
            frame: 997,
            hold: Mutex::default(),
            rest_sent: Arc::default(),
            delay: Mutex::default(),
            in_flight: Arc::default(),
            most_in_flight: Arc::default(),
        })
    }

    /// A handle on the dataset, as a process opens it (one GET: the state, and its
    /// manifests when it names any).
    pub fn open(self: &Arc<Recording>) -> Arc<ObjectStorage> {
        let store: Arc<dyn ObjectStore> = Arc::clone(self) as Arc<dyn ObjectStore>;
        Arc::new(ObjectStorage::new(store, PathBuf::from("memory://"), &self.prefix).unwrap())
    }

    /// The GETs recorded since the last call.
    pub fn take(&self) -> Vec<(String, Option<Range<u64>>)> {
        std::mem::take(&mut *self.gets.lock().unwrap())
    }
}

forwarding_object_store!(Recording {
    async fn put_opts(
        &self,
        location: &OPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let n = payload.content_length() as u64;
        self.puts.lock().unwrap().push((location.to_string(), n));
        self.inner.put_opts(location, payload, opts).await
    }

    async fn get_opts(
        &self,
        location: &OPath,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let range = match &options.range {
            Some(GetRange::Bounded(r)) => Some(r.clone()),
            None => None,
            Some(other) => panic!("blz asked an unbounded range {other:?}"),
        };
        let key = location.to_string();
        self.gets.lock().unwrap().push((key.clone(), range));
        let flight = InFlight::new(&self.in_flight, &self.most_in_flight);
        let delay = *self.delay.lock().unwrap();
        if let Some(d) = delay {
            // Waits without holding a thread of the client's runtime.
            let (tx, rx) = futures::channel::oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(d);
                let _ = tx.send(());
            });
            let _ = rx.await;
        }
        let failing = self.fail.lock().unwrap().clone();
        if failing.is_some_and(|f| key.contains(&f)) {
            return Err(object_store::Error::Generic {
                store: "recording",
                source: Box::new(std::io::Error::other("refused (test fault)")),
            });
        }
        let got = self.inner.get_opts(location, options).await?;
        let (meta, range, attributes) =
            (got.meta.clone(), got.range.clone(), got.attributes.clone());
        let extensions = got.extensions.clone();
        let bytes = got.bytes().await?;
        let half = bytes.len() / 2;
        let mut frames: Vec<(usize, blz::storage::Bytes)> = Vec::new();
        for (at, piece) in [(0, bytes.slice(..half)), (half, bytes.slice(half..))] {
            let mut a = 0;
            while a < piece.len() {
                let e = (a + self.frame).min(piece.len());
                frames.push((at + a, piece.slice(a..e)));
                a = e;
            }
        }
        let hold = self.hold.lock().unwrap().clone();
        let rest_sent = Arc::clone(&self.rest_sent);
        let last = frames.len().saturating_sub(1);
        let mut flight = Some(flight);
        let stream = futures::stream::iter(frames.into_iter().enumerate()).map(move |(i, (at, f))| {
            if i == last {
                // The answer's last frame: the GET is over.
                flight.take();
            }
            if at >= half && half > 0 {
                if let Some(h) = &hold {
                    let t = std::time::Instant::now();
                    while !h.load(std::sync::atomic::Ordering::SeqCst)
                        && t.elapsed() < std::time::Duration::from_secs(10)
                    {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
                rest_sent.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(f)
        });
        Ok(GetResult {
            payload: object_store::GetResultPayload::Stream(Box::pin(stream)),
            meta,
            range,
            attributes,
            extensions,
        })
    }
});

/// One GET in flight, counted in `now` (and `most`, the most at once) while it lives.
struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    fn new(
        now: &Arc<std::sync::atomic::AtomicUsize>,
        most: &Arc<std::sync::atomic::AtomicUsize>,
    ) -> InFlight {
        use std::sync::atomic::Ordering::SeqCst;
        let n = now.fetch_add(1, SeqCst) + 1;
        most.fetch_max(n, SeqCst);
        InFlight(Arc::clone(now))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Rows and columns of the test dataset, its chunks `CHUNK` and chunks per file.
pub const ROWS: u64 = 700;
pub const COLS: u64 = 60;
pub const CHUNK: [u64; 2] = [50, 20];
pub const PER_FILE: u64 = 6;

/// The same 2-D dataset (42 chunks in 7 files) on the recording store and on a local disk.
pub fn both() -> (Arc<Recording>, tempfile::TempDir, PathBuf) {
    let rec = Recording::new();
    let s = rec.open();
    let root = s.root().to_path_buf();
    let o = CreateOptions {
        chunkshape: Some(CHUNK.to_vec()),
        superchunksize: Some(PER_FILE),
        ..Default::default()
    };
    let data = Array2::from_shape_fn((ROWS as usize, COLS as usize), |(i, j)| {
        // Compressible, and different in every element.
        (i as i64) * 1000 + (j as i64) * 7 + (i as i64 % 13) * 100_000
    })
    .into_dyn();
    let mut ds = Dataset::create_in(s, &root, DType::I64, &[0, COLS], &o).unwrap();
    ds.append(&data.view()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("ds.blz");
    let mut l = Dataset::create_with(&local, DType::I64, &[0, COLS], &o).unwrap();
    l.append(&data.view()).unwrap();
    rec.take();
    (rec, dir, local)
}

/// The data files of the state, each with its object key and the ranges its front holds.
pub fn data_files(s: &ObjectStorage, prefix: &str) -> Vec<(String, String, Vec<Range<u64>>)> {
    let state = s.state().unwrap().unwrap();
    state
        .files
        .iter()
        .filter_map(|(path, f)| match f {
            blz::storage::object::StateFile::Object { key, front, .. }
                if path.starts_with("data/") =>
            {
                let fr = front
                    .as_ref()
                    .map(|fr| fr.ranges.iter().map(|&[a, n]| a..a + n).collect())
                    .unwrap_or_default();
                Some((path.clone(), format!("{prefix}/{key}"), fr))
            }
            _ => None,
        })
        .collect()
}

pub fn read_sel(ds: &Dataset, sel: &str) -> ArrayD<i64> {
    ds.read_selection::<i64>(&Selection::parse(sel).unwrap())
        .unwrap()
}
