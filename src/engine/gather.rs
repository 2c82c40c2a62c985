//! Advanced selections ([`Fancy`]) cut along a chunk grid: the gather that reads them and
//! the scatter that writes them, chunk by chunk.
//!
//! Each group's positions are bucketed by the chunk (of the group's axes) they fall in; a
//! touched chunk is one bucket of every group, so only those chunks are decoded (in
//! parallel), and each element moves once between its chunk and the caller's buffer. Within
//! a bucket, positions keep their order, so of two writes to one element the later wins, as
//! in numpy.

use super::chunks::ChunkWrites;
use super::core::ArrayCore;
use super::select::strides;
use crate::dtype::swap_bytes;
use crate::error::{Error, Result};
use crate::fancy::{AxisIndex, Fancy, Group};
use crate::stats::ChunkStats;
use crate::txn::Txn;
use rayon::prelude::*;

/// The positions of one group that fall in one chunk (of the group's axes).
#[derive(Debug)]
struct Bucket {
    /// The chunk's contribution to the linear chunk index.
    k: u64,
    /// Number of positions.
    count: u64,
    /// Per position, in selection order: its element offset in the output (C order over
    /// the groups' counts) and in the chunk. Kept for all groups but the last.
    entries: Vec<(u64, u64)>,
    /// For the last group, the positions merged into runs contiguous in both: `(out, in,
    /// len)` (a dense selection gives few).
    runs: Vec<(u64, u64, u64)>,
}

/// A [`Fancy`] selection cut along a chunk grid.
#[derive(Debug)]
pub(crate) struct GatherPlan {
    /// Per group, its buckets, ascending by chunk.
    groups: Vec<Vec<Bucket>>,
    /// Every touched chunk: its linear index and its bucket in each group, ascending by
    /// chunk index.
    chunks: Vec<(u64, Vec<u32>)>,
    /// Elements selected.
    elements: u64,
}

impl GatherPlan {
    /// Cuts `sel` (already resolved against `shape`, so every position is inside it)
    /// along the chunk grid of `chunkshape`.
    pub(crate) fn new(sel: &Fancy, shape: &[u64], chunkshape: &[u64]) -> Result<GatherPlan> {
        let counts: Vec<u64> = sel.groups().iter().map(Group::count).collect();
        let out_strides = strides(&counts);
        let in_strides = strides(chunkshape);
        let grid: Vec<u64> = shape
            .iter()
            .zip(chunkshape)
            .map(|(&n, &c)| n.div_ceil(c.max(1)))
            .collect();
        let grid_strides = strides(&grid);
        let mut groups = Vec::with_capacity(counts.len());
        for (g, &os) in sel.groups().iter().zip(&out_strides) {
            // (chunk contribution, out offset, in offset) per position, in selection order.
            let mut pos: Vec<(u64, u64, u64)> = Vec::with_capacity(g.count() as usize);
            let mut place = |out: u64, coords: &mut dyn Iterator<Item = (usize, u64)>| {
                let (mut k, mut inn) = (0u64, 0u64);
                for (axis, p) in coords {
                    let (cs, gs, is) = (chunkshape[axis], grid_strides[axis], in_strides[axis]);
                    k += p / cs * gs;
                    inn += p % cs * is;
                }
                pos.push((k, out * os, inn));
            };
            match g {
                Group::Axis { axis, index } => match index {
                    AxisIndex::Strided(s) => {
                        for j in 0..s.count {
                            let out = if s.reversed { s.count - 1 - j } else { j };
                            place(out, &mut std::iter::once((*axis, s.start + j * s.step)));
                        }
                    }
                    AxisIndex::List(v) => {
                        for (j, &p) in v.iter().enumerate() {
                            place(j as u64, &mut std::iter::once((*axis, p)));
                        }
                    }
                },
                Group::Points { axes, coords } => {
                    let n = coords.first().map_or(0, Vec::len);
                    for j in 0..n {
                        place(
                            j as u64,
                            &mut axes.iter().zip(coords).map(|(&a, c)| (a, c[j])),
                        );
                    }
                }
            }
            // Stable: positions in one chunk keep their selection order.
            pos.sort_by_key(|p| p.0);
            let mut buckets: Vec<Bucket> = Vec::new();
            for (k, o, i) in pos {
                match buckets.last_mut() {
                    Some(b) if b.k == k => b.entries.push((o, i)),
                    _ => buckets.push(Bucket {
                        k,
                        count: 0,
                        entries: vec![(o, i)],
                        runs: Vec::new(),
                    }),
                }
            }
            let last = groups.len() + 1 == counts.len();
            for b in &mut buckets {
                b.count = b.entries.len() as u64;
                if last {
                    b.runs = runs(&b.entries);
                    b.entries = Vec::new();
                }
            }
            groups.push(buckets);
        }
        let mut chunks = Vec::new();
        let total: u64 = groups.iter().map(|b| b.len() as u64).product();
        if total > 0 {
            let mut idx = vec![0u32; groups.len()];
            'all: loop {
                let k = idx
                    .iter()
                    .zip(&groups)
                    .map(|(&i, b)| b[i as usize].k)
                    .sum::<u64>();
                chunks.push((k, idx.clone()));
                let mut ax = groups.len();
                loop {
                    if ax == 0 {
                        break 'all;
                    }
                    ax -= 1;
                    idx[ax] += 1;
                    if (idx[ax] as usize) < groups[ax].len() {
                        break;
                    }
                    idx[ax] = 0;
                }
            }
        }
        chunks.sort_unstable_by_key(|c| c.0);
        let elements = counts.iter().product();
        if u32::try_from(groups.iter().map(Vec::len).max().unwrap_or(0)).is_err() {
            return Err(Error::InvalidArgument(
                "a selection touches more than 2^32 chunks along one group".into(),
            ));
        }
        Ok(GatherPlan {
            groups,
            chunks,
            elements,
        })
    }

    /// Calls `f(out, in, len)` for every run of the touched chunk whose buckets are `c`,
    /// in selection order.
    fn for_each_run(&self, c: &[u32], f: &mut dyn FnMut(u64, u64, u64)) {
        fn walk(
            groups: &[Vec<Bucket>],
            c: &[u32],
            depth: usize,
            base: (u64, u64),
            f: &mut dyn FnMut(u64, u64, u64),
        ) {
            let b = &groups[depth][c[depth] as usize];
            if depth + 1 == groups.len() {
                for &(o, i, n) in &b.runs {
                    f(base.0 + o, base.1 + i, n);
                }
            } else {
                for &(o, i) in &b.entries {
                    walk(groups, c, depth + 1, (base.0 + o, base.1 + i), f);
                }
            }
        }
        if self.groups.is_empty() {
            f(0, 0, 1);
        } else {
            walk(&self.groups, c, 0, (0, 0), f);
        }
    }

    /// Runs and elements of one touched chunk.
    fn size(&self, c: &[u32]) -> (u64, u64) {
        let (mut runs, mut elems) = (1u64, 1u64);
        for (d, (b, &i)) in self.groups.iter().zip(c).enumerate() {
            let b = &b[i as usize];
            elems *= b.count;
            runs *= if d + 1 == self.groups.len() {
                b.runs.len()
            } else {
                b.entries.len()
            } as u64;
        }
        (runs, elems)
    }
}

/// Entries merged into runs contiguous in the output and in the chunk.
fn runs(entries: &[(u64, u64)]) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for &(o, i) in entries {
        match out.last_mut() {
            Some((ro, ri, n)) if *ro + *n == o && *ri + *n == i => *n += 1,
            _ => out.push((o, i, 1)),
        }
    }
    out
}

/// A raw pointer shared by the threads that write disjoint parts of one output buffer.
#[derive(Clone, Copy)]
struct SharedMut(*mut u8, usize);

/// `len` bytes at byte `at` of the buffer behind `p`.
///
/// # Safety
/// `at + len` must lie inside the buffer, which must outlive the slice, and no other
/// thread may touch those bytes while the slice lives.
unsafe fn region<'a>(p: SharedMut, at: usize, len: usize) -> &'a mut [u8] {
    debug_assert!(at + len <= p.1);
    // SAFETY: the caller's contract.
    unsafe { std::slice::from_raw_parts_mut(p.0.add(at), len) }
}
// SAFETY: only disjoint regions (one per touched chunk) of a buffer that outlives the
// parallel loop are written through it.
unsafe impl Send for SharedMut {}
// SAFETY: as above.
unsafe impl Sync for SharedMut {}

impl ArrayCore {
    /// The rows at `indices` (inside `0..nrows`) of a one-dimensional store (a table's
    /// fixed-size column), as native-endian bytes: only the chunks holding them are decoded,
    /// in parallel, straight into the result.
    pub(crate) fn take_rows(&self, nrows: u64, indices: &[u64]) -> Result<Vec<u8>> {
        let mut data = vec![0u8; indices.len() * self.itemsize()];
        if !indices.is_empty() {
            let sel = Fancy::orthogonal(vec![AxisIndex::List(indices.to_vec())]);
            let plan = GatherPlan::new(&sel, &[nrows], &self.chunkshape)?;
            self.gather_into(&plan, &mut data)?;
        }
        Ok(data)
    }

    /// Reads a planned selection into `out` (native byte order, C order over the groups'
    /// counts; exactly `elements * itemsize` bytes), decoding the touched chunks in
    /// parallel. A chunk that gives only a few short runs is read by Blosc block
    /// (`getitem`), not decoded whole.
    pub(crate) fn gather_into(&self, plan: &GatherPlan, out: &mut [u8]) -> Result<()> {
        let isz = self.itemsize();
        if out.len() as u64 != plan.elements * isz as u64 {
            return Err(Error::InvalidArgument(format!(
                "output buffer has {} bytes, selection needs {}",
                out.len(),
                plan.elements * isz as u64
            )));
        }
        let chunk_bytes = self.chunk_len() * isz;
        let shared = SharedMut(out.as_mut_ptr(), out.len());
        let swap = self.swap_needed();
        let unit = self.dtype.swap_unit();
        // A chunk that gives a few short runs decodes just the blocks holding them.
        let by_runs = |c: &[u32]| {
            let (nruns, elems) = plan.size(c);
            nruns <= 16 && elems as usize * isz * 4 < chunk_bytes
        };
        self.store.for_each_fetched(
            &plan.chunks,
            |(k, _)| *k,
            |(_, c)| {
                if !by_runs(c) {
                    return None;
                }
                let mut span: Option<std::ops::Range<usize>> = None;
                plan.for_each_run(c, &mut |_, i, n| {
                    let r = i as usize * isz..(i + n) as usize * isz;
                    span = Some(match span.take() {
                        Some(s) => s.start.min(r.start)..s.end.max(r.end),
                        None => r,
                    });
                });
                span
            },
            || (Vec::new(), Vec::new()),
            |(scratch, chunk): &mut (Vec<u8>, Vec<u8>), (k, c), fetched| -> Result<()> {
                if by_runs(c) {
                    let mut r = Ok(());
                    plan.for_each_run(c, &mut |o, i, n| {
                        if r.is_err() {
                            return;
                        }
                        let len = n as usize * isz;
                        // SAFETY: the run lies inside the selection's output, and each
                        // output element belongs to one run of one chunk.
                        let dst = unsafe { region(shared, o as usize * isz, len) };
                        r = self
                            .store
                            .getitem_fetched(*k, i as usize * isz, dst, scratch, fetched);
                        if swap {
                            swap_bytes(dst, unit);
                        }
                    });
                    return r;
                }
                chunk.resize(chunk_bytes, 0);
                self.store.decompress_fetched(*k, chunk, scratch, fetched)?;
                if swap {
                    swap_bytes(chunk, unit);
                }
                plan.for_each_run(c, &mut |o, i, n| {
                    let len = n as usize * isz;
                    let from = i as usize * isz;
                    // SAFETY: as above.
                    let dst = unsafe { region(shared, o as usize * isz, len) };
                    dst.copy_from_slice(&chunk[from..from + len]);
                });
                Ok(())
            },
        )
    }

    /// Writes `src` (laid out as [`gather_into`](Self::gather_into) fills its output) into
    /// a planned selection through `writes`: each touched chunk is decoded, patched and
    /// re-encoded (a few chunks at a time, in parallel), then put in chunk order. Every
    /// chunk touched must be committed.
    pub(crate) fn scatter(
        &self,
        txn: &mut Txn<'_>,
        writes: &mut ChunkWrites<'_>,
        plan: &GatherPlan,
        shape: &[u64],
        src: &[u8],
    ) -> Result<()> {
        let isz = self.itemsize();
        let want_stats = self.store.stats_kind().is_some();
        let grid = self.grid(shape);
        if src.len() as u64 != plan.elements * isz as u64 {
            return Err(Error::InvalidArgument(format!(
                "{} bytes given for a selection of {} elements",
                src.len(),
                plan.elements
            )));
        }
        let chunk_bytes = self.chunk_len() * isz;
        let params = self.blosc_params();
        let batch = 2 * rayon::current_num_threads().max(1);
        for part in plan.chunks.chunks(batch) {
            let encoded: Vec<(u64, Vec<u8>, Option<ChunkStats>)> = part
                .par_iter()
                .map_init(
                    Vec::new,
                    |scratch, (k, c)| -> Result<(u64, Vec<u8>, Option<ChunkStats>)> {
                        let mut chunk = vec![0u8; chunk_bytes];
                        self.decode_chunk_into(*k, &mut chunk, scratch)?;
                        plan.for_each_run(c, &mut |o, i, n| {
                            let len = n as usize * isz;
                            let (from, to) = (o as usize * isz, i as usize * isz);
                            chunk[to..to + len].copy_from_slice(&src[from..from + len]);
                        });
                        // The chunk's visible extents (its statistics cover only those).
                        let mut rest = *k;
                        let mut valid = vec![0u64; grid.len()];
                        for (a, (&g, (&n, &cs))) in grid
                            .iter()
                            .zip(shape.iter().zip(&self.chunkshape))
                            .enumerate()
                            .rev()
                        {
                            let coord = rest % g.max(1);
                            rest /= g.max(1);
                            valid[a] = (n - coord * cs).min(cs);
                        }
                        let mut out = Vec::new();
                        let st = self.encode(
                            &mut chunk,
                            &params,
                            &mut out,
                            want_stats.then_some(&valid[..]),
                        )?;
                        Ok((*k, out, st))
                    },
                )
                .collect::<Result<_>>()?;
            for (k, c, st) in encoded {
                writes.put(txn, k, c, st.as_ref())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::AxisSel;

    #[test]
    fn runs_merge_only_contiguous() {
        assert_eq!(
            runs(&[(0, 5), (1, 6), (2, 7), (3, 7), (4, 1)]),
            vec![(0, 5, 3), (3, 7, 1), (4, 1, 1)]
        );
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn plan_buckets_by_chunk() {
        // 10 x 6, chunks 4 x 3: rows [9, 0, 5, 1] and columns 1..6 by 2 (1, 3, 5).
        let f = Fancy::orthogonal(vec![
            AxisIndex::List(vec![9, 0, 5, 1]),
            AxisIndex::Strided(AxisSel {
                start: 1,
                step: 2,
                count: 3,
                reversed: true,
                keep: true,
            }),
        ]);
        let plan = GatherPlan::new(&f, &[10, 6], &[4, 3]).unwrap();
        // Row chunks 0, 1, 2 and column chunks 0, 1: six chunks, ascending.
        let ks: Vec<u64> = plan.chunks.iter().map(|c| c.0).collect();
        assert_eq!(ks, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(plan.elements, 12);
        // Row chunk 0 holds rows 0 then 1 (selection order), output rows 1 and 3.
        let b = &plan.groups[0][0];
        assert_eq!(b.entries, vec![(3, 0), (9, 3)]);
        // Reversed: column 5 is output column 0.
        let b = &plan.groups[1][1];
        assert_eq!(b.runs, vec![(1, 0, 1), (0, 2, 1)]);
        assert_eq!(b.count, 2);
    }
}
