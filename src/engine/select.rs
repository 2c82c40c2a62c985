//! Resolved selections ([`AxisSel`]) cut along a chunk grid, and the strided copies between
//! chunk buffers and output buffers.

use crate::selection::AxisSel;

/// The part of one chunk a selection touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChunkPart {
    /// Chunk coordinates in the chunk grid.
    pub coords: Vec<u64>,
    /// Per axis: first position inside the chunk, step, count, and first position in the
    /// (un-reversed) selection.
    pub axes: Vec<PartAxis>,
}

/// One axis of a [`ChunkPart`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartAxis {
    /// First position inside the chunk.
    pub in_start: u64,
    /// Step inside the chunk.
    pub step: u64,
    /// Number of positions.
    pub count: u64,
    /// Position of the first one in the selection's (un-reversed) index space.
    pub out_start: u64,
}

/// For one axis: the chunks a selection touches and, for each, its [`PartAxis`].
fn axis_parts(s: &AxisSel, cs: u64) -> Vec<(u64, PartAxis)> {
    let mut parts = Vec::new();
    if s.count == 0 {
        return parts;
    }
    let mut k = 0u64; // index within the selection
    while k < s.count {
        let idx = s.start + k * s.step;
        let c = idx / cs;
        let chunk_end = (c + 1) * cs;
        // Selection indices k..k+m lie in this chunk.
        let m = ((chunk_end - idx - 1) / s.step + 1).min(s.count - k);
        parts.push((
            c,
            PartAxis {
                in_start: idx - c * cs,
                step: s.step,
                count: m,
                out_start: k,
            },
        ));
        k += m;
    }
    parts
}

/// Every chunk a selection touches, with the part of it that is selected.
pub(crate) fn chunk_parts(sel: &[AxisSel], chunkshape: &[u64]) -> Vec<ChunkPart> {
    let per_axis: Vec<Vec<(u64, PartAxis)>> = sel
        .iter()
        .zip(chunkshape)
        .map(|(s, &cs)| axis_parts(s, cs))
        .collect();
    if per_axis.iter().any(Vec::is_empty) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut idx = vec![0usize; per_axis.len()];
    loop {
        out.push(ChunkPart {
            coords: idx.iter().zip(&per_axis).map(|(&i, p)| p[i].0).collect(),
            axes: idx.iter().zip(&per_axis).map(|(&i, p)| p[i].1).collect(),
        });
        let mut ax = per_axis.len();
        loop {
            if ax == 0 {
                return out;
            }
            ax -= 1;
            idx[ax] += 1;
            if idx[ax] < per_axis[ax].len() {
                break;
            }
            idx[ax] = 0;
        }
    }
}

/// C-order element strides of a shape.
pub(crate) fn strides(shape: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Copies the selected part of a chunk between the chunk buffer and a buffer laid out in
/// C order over `sel_shape` (the un-reversed counts of every axis, dropped axes included).
/// `to_chunk` chooses the direction. Buffers are raw bytes of `itemsize`-byte elements.
///
/// # Safety
/// `chunk` must be valid for `prod(chunkshape) * itemsize` bytes and `buf` for
/// `prod(sel_shape) * itemsize` bytes; the part must lie inside both (as produced by
/// [`chunk_parts`] for the same selection). Concurrent calls must touch disjoint bytes of the
/// buffer they write.
pub(crate) unsafe fn copy_part(
    part: &ChunkPart,
    chunk: *mut u8,
    chunkshape: &[u64],
    buf: *mut u8,
    sel_shape: &[u64],
    itemsize: usize,
    to_chunk: bool,
) {
    let nd = chunkshape.len();
    let cst = strides(chunkshape);
    let bst = strides(sel_shape);
    let last = nd - 1;
    let inner = part.axes[last];
    let run_contig = inner.step == 1;
    let mut idx = vec![0u64; nd];
    loop {
        let mut coff = 0u64;
        let mut boff = 0u64;
        for ax in 0..last {
            let a = &part.axes[ax];
            coff += (a.in_start + idx[ax] * a.step) * cst[ax];
            boff += (a.out_start + idx[ax]) * bst[ax];
        }
        coff += inner.in_start;
        boff += inner.out_start;
        let (c, b) = (
            chunk.add(coff as usize * itemsize),
            buf.add(boff as usize * itemsize),
        );
        if run_contig {
            let n = inner.count as usize * itemsize;
            if to_chunk {
                std::ptr::copy_nonoverlapping(b, c, n);
            } else {
                std::ptr::copy_nonoverlapping(c, b, n);
            }
        } else {
            for j in 0..inner.count as usize {
                let cj = c.add(j * inner.step as usize * itemsize);
                let bj = b.add(j * itemsize);
                if to_chunk {
                    std::ptr::copy_nonoverlapping(bj, cj, itemsize);
                } else {
                    std::ptr::copy_nonoverlapping(cj, bj, itemsize);
                }
            }
        }
        // Next index over the outer axes.
        let mut ax = last;
        loop {
            if ax == 0 {
                return;
            }
            ax -= 1;
            idx[ax] += 1;
            if idx[ax] < part.axes[ax].count {
                break;
            }
            idx[ax] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_selection_once() {
        let sel = [
            AxisSel {
                start: 1,
                step: 3,
                count: 6,
                reversed: false,
                keep: true,
            },
            AxisSel::full(5),
        ];
        let parts = chunk_parts(&sel, &[4, 2]);
        let total: u64 = parts
            .iter()
            .map(|p| p.axes.iter().map(|a| a.count).product::<u64>())
            .sum();
        assert_eq!(total, 30);
        // Indices 1,4,7,10,13,16 over chunks of 4: chunks 0,1,1,2,3,4 -> 5 chunks x 3 columns.
        assert_eq!(parts.len(), 15);
    }
}
