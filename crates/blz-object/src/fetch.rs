//! Fetching file bytes: ranged GETs of the objects holding a file, merged, split into parts and
//! retried, and what a missing object means.

use crate::client::eof;
use crate::client::runtime;
use crate::client::Backend;
use crate::client::Client;
use crate::client::ReadTuning;
use crate::extents::slice_pieces;
use crate::extents::Piece;
use crate::front::decode_packed_index;
use crate::front::FrontCopy;
use crate::keys::MAX_FRONT;
use crate::keys::STATE_KEY;
use blz_format::blosc::BlockIndex;
use blz_format::error::Error;
use blz_format::error::Result;
use bytes::Bytes;
use futures::StreamExt;
use object_store::GetOptions;
use object_store::GetRange;
use object_store::ObjectStore;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
/// Why a fetch of ranges failed, told apart outside the runtime (a missing object is
/// explained by reading the state again, which blocks).
pub(crate) enum FetchFailure {
    /// A request failed: the object it asked, when it started, the store's error.
    Store {
        key: String,
        started: std::time::Instant,
        error: object_store::Error,
    },
    /// An answer shorter than the range asked.
    Short,
    /// An answer naming an object of another size than the state gives it.
    Size { key: String, got: u64, want: u64 },
}

impl Backend {
    /// The bytes of `ranges` of the file `path` stored as the object `key` (each inside the
    /// file; empty ones cost nothing), in the order asked: the ranges, mapped to objects by
    /// [`locate`], are read with as few requests as [`ReadTuning`] allows, all at
    /// once. A missing object was collected after a later commit (the dataset changed under
    /// this reader: [`Error::Changed`]) unless the state object, read again, says otherwise:
    /// when it is gone, the dataset was removed; when it still names the object, the object
    /// is lost for good (both `NotFound`, naming the dataset or the object, so that no retry
    /// loop waits for a change).
    pub(crate) fn read_file_ranges(
        &self,
        pieces: &[Piece],
        ranges: &[std::ops::Range<u64>],
        path: &Path,
    ) -> Result<Vec<Bytes>> {
        blz_format::storage::in_order(ranges.len(), |each| {
            self.read_file_ranges_each(pieces, ranges, path, each)
        })
    }

    /// [`read_file_ranges`](Self::read_file_ranges), each range's bytes handed to `each`
    /// (with its index in `ranges`) as soon as they are in: a range lying in one object
    /// while its request is still streaming the bytes after it, one spread over several
    /// objects once all of them are in. `each` runs on the thread that called, between
    /// the reads of the answers: work it is given should go elsewhere.
    pub(crate) fn read_file_ranges_each(
        &self,
        pieces: &[Piece],
        ranges: &[std::ops::Range<u64>],
        path: &Path,
        each: &(dyn Fn(usize, Bytes) + Sync),
    ) -> Result<()> {
        // Each object's size, as the state gives it, and its pieces to read: (piece
        // number, range in the object).
        let mut by_object: BTreeMap<String, (u64, Vec<Member>)> = BTreeMap::new();
        // Where each piece's bytes go: straight to `each` for a range of one piece, else
        // into the range's list, to be joined.
        let mut goes_to: Vec<(usize, Option<usize>)> = Vec::new();
        let mut split: Vec<(usize, usize)> = Vec::new();
        for (i, r) in ranges.iter().enumerate() {
            let found = if r.start < r.end {
                slice_pieces(pieces, r.clone())
            } else {
                Vec::new()
            };
            let n = found.len();
            if n == 0 {
                each(i, Bytes::new());
            } else if n > 1 {
                split.push((i, n));
            }
            for (k, p) in found.into_iter().enumerate() {
                by_object
                    .entry(p.key.to_string())
                    .or_insert_with(|| (p.size, Vec::new()))
                    .1
                    .push((goes_to.len(), p.at..p.at + p.len));
                goes_to.push((i, (n > 1).then_some(k)));
            }
        }
        if by_object.is_empty() {
            return Ok(());
        }
        let joins: Mutex<HashMap<usize, Vec<Option<Bytes>>>> =
            Mutex::new(split.iter().map(|&(i, n)| (i, vec![None; n])).collect());
        let emit = |piece: usize, b: Bytes| match goes_to[piece] {
            (i, None) => each(i, b),
            (i, Some(k)) => {
                let mut j = joins
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(slot) = j.get_mut(&i).and_then(|v| v.get_mut(k)) {
                    *slot = Some(b);
                }
            }
        };
        let rt = runtime()?;
        let (tuning, slots) = self.read_tuning();
        let got = rt.block_on(futures::future::try_join_all(by_object.iter().map(
            |(obj, (size, list))| {
                self.fetch_object_ranges(obj, *size, list, &tuning, &slots, &emit)
            },
        )));
        match got {
            Ok(_) => {}
            Err(FetchFailure::Short) => return Err(eof(path)),
            Err(FetchFailure::Size { key, got, want }) => {
                return Err(Error::metadata(
                    path,
                    format!(
                        "its object {key:?} is {got} bytes, where the state says {want}: \
                         not the object the state names"
                    ),
                ))
            }
            Err(FetchFailure::Store {
                key: obj,
                error: object_store::Error::NotFound { .. },
                ..
            }) => return Err(self.missing_object(&obj, path)),
            Err(FetchFailure::Store { started, error, .. }) => {
                return Err(self.error("read", path, Client::Read, started, error))
            }
        }
        let joins = joins
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (i, parts) in joins {
            let mut joined = Vec::new();
            for b in parts.iter().flatten() {
                joined.extend_from_slice(b);
            }
            each(i, Bytes::from(joined));
        }
        Ok(())
    }

    /// Reads the ranges `list` of the object `key` (each with its piece number), handing
    /// each to `emit` as soon as its bytes are in: ranges lying close (within
    /// [`ReadTuning::coalesce`]) are read by one span's requests, a span longer than
    /// [`ReadTuning::part_size`] by several at once.
    pub(crate) async fn fetch_object_ranges(
        &self,
        key: &str,
        size: u64,
        list: &[Member],
        tuning: &ReadTuning,
        slots: &tokio::sync::Semaphore,
        emit: &(dyn Fn(usize, Bytes) + Sync),
    ) -> std::result::Result<(), FetchFailure> {
        let mut sorted: Vec<Member> = list.to_vec();
        sorted.sort_by_key(|(_, r)| (r.start, r.end));
        let mut spans: Vec<(std::ops::Range<u64>, Vec<Member>)> = Vec::new();
        for (id, r) in sorted {
            match spans.last_mut() {
                Some((span, members)) if r.start <= span.end.saturating_add(tuning.coalesce) => {
                    span.end = span.end.max(r.end);
                    members.push((id, r));
                }
                _ => spans.push((r.clone(), vec![(id, r)])),
            }
        }
        futures::future::try_join_all(spans.iter().map(|(span, members)| {
            self.fetch_span(key, size, span.clone(), members, tuning, slots, emit)
        }))
        .await
        .map(drop)
    }

    /// The requests of one span ([`ReadTuning::parts`]), all at once. A member range lying
    /// in one part is handed over as that part's answer streams in; one spread over two
    /// parts once both are in.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn fetch_span(
        &self,
        key: &str,
        size: u64,
        span: std::ops::Range<u64>,
        members: &[Member],
        tuning: &ReadTuning,
        slots: &tokio::sync::Semaphore,
        emit: &(dyn Fn(usize, Bytes) + Sync),
    ) -> std::result::Result<(), FetchFailure> {
        let parts = tuning.parts(span);
        let mut own: Vec<Vec<Member>> = vec![Vec::new(); parts.len()];
        let mut across = Vec::new();
        for (id, r) in members {
            match parts
                .iter()
                .position(|p| p.start <= r.start && r.end <= p.end)
            {
                Some(j) => own[j].push((*id, r.clone())),
                None => across.push((*id, r.clone())),
            }
        }
        let keep = !across.is_empty();
        let got = futures::future::try_join_all(
            parts
                .iter()
                .zip(&own)
                .map(|(p, o)| self.get_part(key, size, p.clone(), o, slots, emit, keep)),
        )
        .await?;
        let segments: Vec<(u64, Bytes)> = got.into_iter().flatten().collect();
        for (id, r) in across {
            emit(id, cut(&segments, &r));
        }
        Ok(())
    }

    /// One ranged GET (`Range: bytes=a-b`) of the object `key`, once one of `slots` is
    /// free; its answer must hold the whole range, and name the object's size as `size`
    /// (objects are immutable: one of another size is not the object the state names,
    /// whatever its bytes). Each range of `own` goes to `emit` as
    /// soon as the answer has streamed past its end. With `keep`, returns the answer's
    /// bytes as segments (start, bytes), for ranges that also need another part's.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn get_part(
        &self,
        key: &str,
        size: u64,
        range: std::ops::Range<u64>,
        own: &[Member],
        slots: &tokio::sync::Semaphore,
        emit: &(dyn Fn(usize, Bytes) + Sync),
        keep: bool,
    ) -> std::result::Result<Vec<(u64, Bytes)>, FetchFailure> {
        // The slots are never closed: a failure to acquire one only lets the request go.
        let _slot = slots.acquire().await.ok();
        let loc = self.key(key);
        self.note(
            "GET",
            key,
            format_args!("bytes={}-{}", range.start, range.end.saturating_sub(1)),
        );
        let started = std::time::Instant::now();
        let failed = |error| FetchFailure::Store {
            key: key.to_string(),
            started,
            error,
        };
        let want = usize::try_from(range.end - range.start).map_err(|_| FetchFailure::Short)?;
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            ..GetOptions::default()
        };
        let answer = self.store.get_opts(&loc, opts).await.map_err(failed)?;
        if answer.meta.size != size {
            return Err(FetchFailure::Size {
                key: key.to_string(),
                got: answer.meta.size,
                want: size,
            });
        }
        let mut stream = answer.into_stream();
        let mut own = own.to_vec();
        own.sort_by_key(|(_, r)| r.end);
        let mut next = 0;
        // The answer so far: `segments` (handed-out pieces, in order), then `buf` from `at`.
        let mut segments: Vec<(u64, Bytes)> = Vec::new();
        // Room for what the range promises, up to 64 MiB (more grows as bytes come).
        let mut buf = bytes::BytesMut::with_capacity(want.min(64 << 20));
        let mut at = range.start;
        let mut got = 0usize;
        while let Some(frame) = stream.next().await {
            let frame = frame.map_err(failed)?;
            got += frame.len();
            if got > want {
                return Err(FetchFailure::Short);
            }
            buf.extend_from_slice(&frame);
            let end = range.start + got as u64;
            while let Some((id, r)) = own.get(next).filter(|(_, r)| r.end <= end) {
                if r.end > at {
                    let n = (r.end - at) as usize;
                    segments.push((at, buf.split_to(n).freeze()));
                    at = r.end;
                }
                emit(*id, cut(&segments, r));
                next += 1;
            }
        }
        if got != want {
            return Err(FetchFailure::Short);
        }
        if !keep {
            return Ok(Vec::new());
        }
        if !buf.is_empty() {
            segments.push((at, buf.freeze()));
        }
        Ok(segments)
    }

    /// The read settings in force and their slots.
    pub(crate) fn read_tuning(&self) -> (ReadTuning, Arc<tokio::sync::Semaphore>) {
        let r = self
            .reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (r.0, Arc::clone(&r.1))
    }

    /// The file bytes `range` of the file `path` held by `pieces`, read as
    /// [`Backend::read_file_ranges`] reads them (one ranged GET per object piece the range
    /// covers, split into parts past the part size).
    pub(crate) fn read_pieces(
        &self,
        pieces: &[Piece],
        range: std::ops::Range<u64>,
        path: &Path,
    ) -> Result<Bytes> {
        let want = range.end - range.start;
        let got = self
            .read_file_ranges(pieces, std::slice::from_ref(&range), path)?
            .pop()
            .unwrap_or_default();
        if got.len() as u64 != want {
            return Err(eof(path));
        }
        Ok(got)
    }

    /// The block index of the file `path` whose front is `front`: the one the front carries,
    /// or the one in its `blocks_object`, read (one GET) on the first use and kept; `None`
    /// when it has neither.
    ///
    /// # Errors
    /// [`Error::InvalidMetadata`] naming the state (an index the front carries) or the
    /// object (one read from it) when it does not decode; the read's error when the object
    /// cannot be read (not kept: the next use reads again).
    pub(crate) fn front_index(
        &self,
        front: &FrontCopy,
        path: &Path,
    ) -> Result<Option<Arc<BlockIndex>>> {
        let bad = |at: PathBuf, why: &str| {
            Error::metadata(at, format!("block index of {}: {why}", path.display()))
        };
        let Some(o) = &front.front.blocks_object else {
            return front
                .block_index()
                .map(Option::<&Arc<BlockIndex>>::cloned)
                .map_err(|why| bad(self.root.join(STATE_KEY), &why));
        };
        let at = self.root.join(&o.key);
        if o.size > MAX_FRONT {
            return Err(bad(
                at,
                &format!("an object of {} bytes, over {MAX_FRONT}", o.size),
            ));
        }
        let got = match front.fetched.get() {
            Some(got) => got,
            None => {
                let piece = Piece {
                    key: Arc::from(o.key.as_str()),
                    size: o.size,
                    at: 0,
                    len: o.size,
                };
                let packed = self.read_pieces(&[piece], 0..o.size, &at)?;
                front
                    .fetched
                    .get_or_init(|| decode_packed_index(&packed).map(Arc::new))
            }
        };
        got.as_ref()
            .map(|i| Some(Arc::clone(i)))
            .map_err(|why| bad(at, why))
    }

    /// Why the object `key` of the loaded state (holding the file `path`) is missing, from
    /// the state object as it is now (see [`Backend::read_file_ranges`]).
    pub(crate) fn missing_object(&self, key: &str, path: &Path) -> Error {
        let now = match self.fetch_state() {
            Ok((state, _, _)) => state,
            Err(e) => return e,
        };
        let Some(now) = now else {
            return Error::io(
                "read",
                &self.root,
                std::io::Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "the dataset was removed (its state object {} is gone)",
                        self.root.join(STATE_KEY).display()
                    ),
                ),
            );
        };
        let still_named = now.files.values().any(|f| f.keys().contains(&key));
        if still_named {
            return Error::io(
                "read",
                self.root.join(key),
                std::io::Error::new(
                    ErrorKind::NotFound,
                    format!(
                        "the object holding {} is missing, and the dataset's current state \
                         (generation {}) still names it: the dataset is damaged",
                        path.display(),
                        now.generation
                    ),
                ),
            );
        }
        Error::Changed {
            path: self.root.clone(),
        }
    }
}

/// A range of an object to read, with the number of the file piece it is.
pub(crate) type Member = (usize, std::ops::Range<u64>);

/// The bytes `r` from `segments` (start, bytes) that hold them, in order and adjoining:
/// a slice of one segment when one holds them all, else a copy joined from several.
pub(crate) fn cut(segments: &[(u64, Bytes)], r: &std::ops::Range<u64>) -> Bytes {
    let within = |(s, b): &&(u64, Bytes)| *s <= r.start && r.end <= *s + b.len() as u64;
    if let Some((s, b)) = segments.iter().find(within) {
        return b.slice((r.start - s) as usize..(r.end - s) as usize);
    }
    let mut joined = Vec::with_capacity((r.end - r.start) as usize);
    for (s, b) in segments {
        let (a, e) = (r.start.max(*s), r.end.min(*s + b.len() as u64));
        if a < e {
            joined.extend_from_slice(&b[(a - s) as usize..(e - s) as usize]);
        }
    }
    Bytes::from(joined)
}
