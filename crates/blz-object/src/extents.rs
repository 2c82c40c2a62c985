//! A file's bytes as pieces of objects: cutting, joining and clipping the extents a state entry
//! lists.

use crate::entry::StateFile;
use crate::front::Front;
use crate::keys::ExtentObject;
use std::sync::Arc;
/// A piece of a file: `len` bytes of the object `key` (of `size` bytes) from its byte `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) key: Arc<str>,
    pub(crate) size: u64,
    pub(crate) at: u64,
    pub(crate) len: u64,
}

/// The pieces holding a file of the state, in order (none for an inline file).
pub(crate) fn pieces_of(f: &StateFile) -> Vec<Piece> {
    match f {
        StateFile::Object { key, len, .. } if *len > 0 => vec![Piece {
            key: Arc::from(key.as_str()),
            size: *len,
            at: 0,
            len: *len,
        }],
        StateFile::Extents {
            objects, extents, ..
        } => {
            let keys: Vec<Arc<str>> = objects.iter().map(|o| Arc::from(o.key.as_str())).collect();
            extents
                .iter()
                .filter_map(|&[o, at, len]| {
                    let o = usize::try_from(o).ok()?;
                    Some(Piece {
                        key: Arc::clone(keys.get(o)?),
                        size: objects.get(o)?.size,
                        at,
                        len,
                    })
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The state entry of a file of `len` bytes held by `pieces`: one whole object in the
/// first form, else extents.
pub(crate) fn entry_of(pieces: &[Piece], len: u64, front: Option<Front>) -> StateFile {
    match pieces {
        [p] if p.at == 0 && p.len == p.size => StateFile::Object {
            key: p.key.to_string(),
            len,
            front,
        },
        _ => {
            let mut objects: Vec<ExtentObject> = Vec::new();
            let mut extents = Vec::with_capacity(pieces.len());
            for p in pieces {
                let i = match objects.iter().position(|o| *o.key == *p.key) {
                    Some(i) => i,
                    None => {
                        objects.push(ExtentObject {
                            key: p.key.to_string(),
                            size: p.size,
                        });
                        objects.len() - 1
                    }
                };
                extents.push([i as u64, p.at, p.len]);
            }
            StateFile::Extents {
                len,
                objects,
                extents,
                front,
            }
        }
    }
}

/// The pieces holding the file bytes `range`, cut to it, in order. Bytes past the pieces
/// are left out.
pub(crate) fn slice_pieces(pieces: &[Piece], range: std::ops::Range<u64>) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut start = 0u64;
    for p in pieces {
        let end = start + p.len;
        let (a, b) = (range.start.max(start), range.end.min(end));
        if a < b {
            out.push(Piece {
                key: Arc::clone(&p.key),
                size: p.size,
                at: p.at + (a - start),
                len: b - a,
            });
        }
        if end >= range.end {
            break;
        }
        start = end;
    }
    out
}

/// Joins neighbouring pieces that continue each other in one object.
pub(crate) fn join_pieces(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for p in pieces {
        match out.last_mut() {
            Some(q) if q.key == p.key && q.at + q.len == p.at => q.len += p.len,
            _ => out.push(p),
        }
    }
    out
}

/// Adds `r` to a set of sorted, apart ranges, merging those it touches.
pub(crate) fn add_range(set: &mut Vec<std::ops::Range<u64>>, r: std::ops::Range<u64>) {
    if r.is_empty() {
        return;
    }
    let (mut start, mut end) = (r.start, r.end);
    let mut out = Vec::with_capacity(set.len() + 1);
    let mut placed = false;
    for s in set.drain(..) {
        if s.end < start {
            out.push(s);
        } else if s.start > end {
            if !placed {
                out.push(start..end);
                placed = true;
            }
            out.push(s);
        } else {
            start = start.min(s.start);
            end = end.max(s.end);
        }
    }
    if !placed {
        out.push(start..end);
    }
    *set = out;
}

/// Cuts a set of sorted ranges to below `n`.
pub(crate) fn clip_ranges(set: &mut Vec<std::ops::Range<u64>>, n: u64) {
    set.retain(|r| r.start < n);
    if let Some(last) = set.last_mut() {
        last.end = last.end.min(n);
    }
}
