//! A few bytes out of an LZ4 block without decoding it: random access by back references.
//!
//! An LZ4 block is a list of sequences, each some literal bytes (stored as they are) then a
//! match (a copy of earlier output, `offset` bytes back). A short read of a Blosc block
//! needs ~100 bytes of each of its streams, but decoding a stream means writing every byte
//! up to them: for compressible data (a float64 linspace keeps ~20:1 in c-blosc's 1 MiB
//! blocks) that is most of a megabyte of match copies per read. Here the stream is only
//! *parsed* (each sequence's token, lengths and offset, skipping over the literals: work in
//! proportion to the compressed bytes, which are few exactly when decoding is costly), and
//! each byte wanted is followed back through the matches that copied it to the literal it
//! came from. Byte `u` of a match that starts at output position `m` with offset `o` is
//! byte `m - o + (u mod o)` (an overlapping match repeats its last `o` bytes), so every step
//! lands before the match it left and the walk ends at a literal.
//!
//! Only the sequences up to the last byte wanted are parsed (matches copy only earlier
//! output), and of those the parse checks what LZ4's safe decoder checks (lengths within
//! the stream and the output, offsets non-zero and pointing inside what is already written;
//! parsed to its end, the output exactly the size expected and the stream consumed
//! exactly), so no walk reads outside the stream. Like c-blosc's `blosc_getitem`, which
//! decodes only the blocks a read needs, a short read does not look at the rest: blz reads
//! a chunk this way only after its digest was checked (`SuperchunkReader::getitem_into`).
//! Walks are bounded: when one takes more steps than [`step_budget`] allows (data whose
//! matches chain back a long way), the caller decodes the stream.

/// One LZ4 sequence, positions in the decoded stream and in the compressed one.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seq {
    /// Output position of the sequence's first literal (or of its match, with no literals).
    out: u32,
    /// Where its literals lie in the compressed stream.
    lit_src: u32,
    /// Literal bytes.
    lit_len: u32,
    /// Match bytes (0 for the last sequence).
    match_len: u32,
    /// How far back the match copies from.
    offset: u32,
}

impl Seq {
    fn new(out: usize, lit_src: usize, lit_len: usize, match_len: usize, offset: usize) -> Seq {
        // Every field is below the stream's decoded size, which `parse` keeps under 2^31.
        Seq {
            out: out as u32,
            lit_src: lit_src as u32,
            lit_len: lit_len as u32,
            match_len: match_len as u32,
            offset: offset as u32,
        }
    }
}

/// Why a stream could not be parsed: corrupt, with the reason.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Malformed(pub(super) &'static str);

fn byte(src: &[u8], at: usize) -> Result<u8, Malformed> {
    src.get(at)
        .copied()
        .ok_or(Malformed("length or offset past the stream's end"))
}

/// Reads an LZ4 length continued in 255-bytes, adding to `len`.
fn more_len(src: &[u8], ip: &mut usize, len: &mut usize) -> Result<(), Malformed> {
    loop {
        let b = byte(src, *ip)?;
        *ip += 1;
        *len += usize::from(b);
        if b != 255 {
            return Ok(());
        }
    }
}

/// Parses the LZ4 block `src`, which must decode to exactly `out_len` bytes, into `seqs`
/// (cleared first), up to the sequence that writes output byte `upto` (a walk to bytes at
/// or before `upto` needs no later sequence: matches copy only earlier output). With
/// `upto >= out_len - 1` the whole stream is parsed and its length checked.
///
/// # Errors
/// [`Malformed`] when the part of `src` parsed is not the start of such a block.
pub(super) fn parse(
    src: &[u8],
    out_len: usize,
    upto: usize,
    seqs: &mut Vec<Seq>,
) -> Result<(), Malformed> {
    seqs.clear();
    if out_len > i32::MAX as usize || src.len() > i32::MAX as usize {
        return Err(Malformed("stream larger than LZ4 allows"));
    }
    let (mut ip, mut op) = (0usize, 0usize);
    loop {
        let token = byte(src, ip)?;
        ip += 1;
        let mut lit = usize::from(token >> 4);
        if lit == 15 {
            more_len(src, &mut ip, &mut lit)?;
        }
        if lit > src.len() - ip || lit > out_len - op {
            return Err(Malformed("literals past the end"));
        }
        let lit_src = ip;
        ip += lit;
        if ip == src.len() {
            // The last sequence: literals only, ending the output.
            seqs.push(Seq::new(op, lit_src, lit, 0, 0));
            op += lit;
            break;
        }
        let offset = usize::from(u16::from_le_bytes([byte(src, ip)?, byte(src, ip + 1)?]));
        ip += 2;
        if offset == 0 || offset > op + lit {
            return Err(Malformed("match offset outside the output"));
        }
        let mut ml = usize::from(token & 15);
        if ml == 15 {
            more_len(src, &mut ip, &mut ml)?;
        }
        ml += 4;
        if ml > out_len - op - lit {
            return Err(Malformed("match past the end of the output"));
        }
        seqs.push(Seq::new(op, lit_src, lit, ml, offset));
        op += lit + ml;
        if op > upto && op < out_len {
            return Ok(());
        }
    }
    if op != out_len {
        return Err(Malformed("stream decodes to the wrong length"));
    }
    Ok(())
}

/// Steps a walk of `n` bytes may take before the caller decodes the stream instead: far
/// more than compressible data needs (a step moves a whole run of bytes), few enough to
/// cost less than a decode of a stream of `out_len` bytes.
pub(super) fn step_budget(n: usize, out_len: usize) -> usize {
    (16 * n).max(out_len / 16).max(256)
}

/// The sequence holding output position `p`: the last one starting at or before it, which
/// is sequence `near` or an earlier one, usually a few earlier (a match copies from a few
/// hundred bytes back, rarely from far). Searched back from `near` in steps that double,
/// not over the whole table (most of whose steps would miss the cache).
fn holding(seqs: &[Seq], p: usize, near: usize) -> usize {
    let mut hi = (near + 1).min(seqs.len());
    let mut step = 1;
    let mut lo = hi.saturating_sub(step);
    while lo > 0 && seqs[lo].out as usize > p {
        hi = lo;
        step *= 2;
        lo = lo.saturating_sub(step);
    }
    // seqs[lo].out <= p (the first sequence starts at 0), seqs[hi] starts after p or is
    // past the end.
    lo + seqs[lo..hi].partition_point(|s| s.out as usize <= p) - 1
}

/// One piece of work of a walk.
#[derive(Clone, Copy, Debug)]
pub(super) enum Work {
    /// Fill `dst[d .. d + len]` with output bytes `p .. p + len`; the sequence holding
    /// `p` is `near` or an earlier one (`holding` searches back from it).
    Fetch {
        d: usize,
        p: usize,
        len: usize,
        near: usize,
    },
    /// `dst[d + k] = dst[d + k - period]` for `k` in `period .. len`: the rest of an
    /// overlapping match, once its first period is in place.
    Repeat { d: usize, period: usize, len: usize },
}

/// Copies bytes `pos .. pos + dst.len()` of the stream `src` (parsed into `seqs` by
/// [`parse`] at least up to the last of them) to `dst`, following matches back to literals.
/// `work` is scratch. `Ok(false)` when the walk would take more than `budget` steps
/// (nothing useful is left in `dst`).
pub(super) fn read(
    src: &[u8],
    seqs: &[Seq],
    pos: usize,
    dst: &mut [u8],
    budget: usize,
    work: &mut Vec<Work>,
) -> bool {
    work.clear();
    work.push(Work::Fetch {
        d: 0,
        p: pos,
        len: dst.len(),
        near: seqs.len().saturating_sub(1),
    });
    let mut steps = 0usize;
    while let Some(w) = work.pop() {
        let (mut d, mut p, mut len, near) = match w {
            Work::Fetch { d, p, len, near } => (d, p, len, near),
            Work::Repeat { d, period, len } => {
                for k in d + period..d + len {
                    dst[k] = dst[k - period];
                }
                continue;
            }
        };
        let mut i = holding(seqs, p, near);
        while len > 0 {
            steps += 1;
            if steps > budget {
                return false;
            }
            let s = seqs[i];
            let (out, lit_len, match_len) =
                (s.out as usize, s.lit_len as usize, s.match_len as usize);
            let m_start = out + lit_len;
            let take;
            if p < m_start {
                take = len.min(m_start - p);
                let from = s.lit_src as usize + (p - out);
                dst[d..d + take].copy_from_slice(&src[from..from + take]);
            } else {
                // Byte u of the match is byte base + (u mod offset): a run of earlier output.
                let (u, o) = (p - m_start, s.offset as usize);
                let base = m_start - o;
                let within = u % o;
                take = len.min(match_len - u);
                if take > o {
                    // More than one period: fetch one (its two parts when it wraps), then
                    // repeat it; the repeat is pushed first so that it runs after them.
                    work.push(Work::Repeat {
                        d,
                        period: o,
                        len: take,
                    });
                    work.push(Work::Fetch {
                        d,
                        p: base + within,
                        len: o - within,
                        near: i,
                    });
                    if within > 0 {
                        work.push(Work::Fetch {
                            d: d + o - within,
                            p: base,
                            len: within,
                            near: i,
                        });
                    }
                } else if take > o - within {
                    work.push(Work::Fetch {
                        d,
                        p: base + within,
                        len: o - within,
                        near: i,
                    });
                    work.push(Work::Fetch {
                        d: d + o - within,
                        p: base,
                        len: take - (o - within),
                        near: i,
                    });
                } else {
                    work.push(Work::Fetch {
                        d,
                        p: base + within,
                        len: take,
                        near: i,
                    });
                }
            }
            d += take;
            p += take;
            len -= take;
            if p >= m_start + match_len {
                i += 1;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{c_char, c_int};

    fn lz4(src: &[u8]) -> Vec<u8> {
        let cap = src.len() + src.len() / 255 + 16;
        let mut out = vec![0u8; cap];
        // SAFETY: `out` has room for LZ4_compressBound(src.len()) bytes.
        let n = unsafe {
            lz4_sys::LZ4_compress_default(
                src.as_ptr().cast::<c_char>(),
                out.as_mut_ptr().cast::<c_char>(),
                src.len() as c_int,
                cap as c_int,
            )
        };
        assert!(n > 0);
        out.truncate(n as usize);
        out
    }

    /// Data of several kinds: runs of one byte (offset-1 matches), short periods, long
    /// repeats far back, noise; from a fixed seed.
    fn data(kind: usize, n: usize) -> Vec<u8> {
        let mut z = 0x1234_5678_9abc_def0u64 ^ kind as u64;
        let mut next = move || {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        };
        match kind {
            0 => vec![7u8; n],
            1 => (0..n).map(|i| (i % 3) as u8).collect(),
            2 => (0..n).map(|_| next() as u8).collect(),
            3 => {
                // A linspace's bytes, byte-shuffled as Blosc stores them.
                let v: Vec<u8> = (0..n / 8)
                    .flat_map(|i| (i as f64 / 1e6).to_le_bytes())
                    .collect();
                let m = v.len() / 8;
                (0..v.len()).map(|b| v[(b % m) * 8 + b / m]).collect()
            }
            _ => {
                // Noise blocks repeated with edits: long matches far back, mixed literals.
                let base: Vec<u8> = (0..5000).map(|_| next() as u8).collect();
                (0..n)
                    .map(|i| {
                        if next() % 97 == 0 {
                            next() as u8
                        } else {
                            base[i % base.len()]
                        }
                    })
                    .collect()
            }
        }
    }

    #[test]
    fn reads_every_range_kind_as_the_decoder_does() {
        let mut seqs = Vec::new();
        let mut work = Vec::new();
        for kind in 0..5 {
            for n in [1usize, 13, 300, 70_000] {
                let plain = data(kind, n);
                let n = plain.len();
                if n == 0 {
                    continue;
                }
                let c = lz4(&plain);
                parse(&c, plain.len(), usize::MAX, &mut seqs).unwrap();
                let mut starts: Vec<usize> = (0..40).map(|k| k * 7919 % n).collect();
                starts.extend([0, n.saturating_sub(1), n / 2]);
                for &s in &starts {
                    for len in [1usize, 8, 100, 4096] {
                        let len = len.min(n - s);
                        let mut out = vec![0xAAu8; len];
                        assert!(read(&c, &seqs, s, &mut out, usize::MAX, &mut work));
                        assert_eq!(out, plain[s..s + len], "kind {kind} n {n} at {s} len {len}");
                        // Parsed only up to the last byte read.
                        let mut part = Vec::new();
                        parse(&c, n, s + len - 1, &mut part).unwrap();
                        assert!(part.len() <= seqs.len());
                        out.fill(0x55);
                        assert!(read(&c, &part, s, &mut out, usize::MAX, &mut work));
                        assert_eq!(out, plain[s..s + len], "kind {kind} n {n} at {s} len {len}");
                    }
                }
            }
        }
    }

    /// Byte-shuffled stream `s` of `n` float64 or u32 values of a progression `a + b i`
    /// (as Blosc splits a block of them: byte `s` of every value), with noise added to
    /// every `noise`-th value when `noise > 0`.
    fn progression(kind: usize, n: usize, s: usize, seed: u64) -> Vec<u8> {
        let mut z = seed;
        let mut next = move || {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x ^ (x >> 31)
        };
        let a = (next() % 1000) as f64;
        let b = 1.0 / (1 + next() % 100_000_000) as f64;
        (0..n)
            .map(|i| match kind {
                0 => (a + b * i as f64).to_le_bytes()[s % 8],
                1 => ((a as u32).wrapping_add((i as u32).wrapping_mul(1 + (b * 1e9) as u32)))
                    .to_le_bytes()[s % 4],
                _ => {
                    let v = a + b * i as f64 + if next() % 50 == 0 { b * 0.5 } else { 0.0 };
                    v.to_le_bytes()[s % 8]
                }
            })
            .collect()
    }

    /// Reads at random places of random and progression streams (fixed seeds), each of a
    /// table parsed only up to the read's last byte, against LZ4's own decoder.
    #[test]
    fn random_reads_agree_with_the_decoder() {
        let (mut seqs, mut work) = (Vec::new(), Vec::new());
        let mut z = 0x5eed_u64;
        let mut next = move || {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (x ^ (x >> 31)) as usize
        };
        for case in 0..48 {
            let n = [131_072, 65_536, 20_000, 4096][case % 4];
            let plain = match case % 6 {
                0 => data(2 + 2 * (case % 2), n),
                k => progression(k % 3, n, case / 6, case as u64),
            };
            let c = lz4(&plain);
            let mut out = vec![0u8; 2048];
            for _ in 0..64 {
                let len = 1 + next() % [8, 100, 800, 2048][next() % 4];
                let len = len.min(n);
                let at = next() % (n - len + 1);
                parse(&c, n, at + len - 1, &mut seqs).unwrap();
                let dst = &mut out[..len];
                dst.fill(0xA5);
                assert!(read(&c, &seqs, at, dst, usize::MAX, &mut work));
                assert_eq!(dst, &plain[at..at + len], "case {case} at {at} len {len}");
            }
        }
    }

    #[test]
    fn rejects_malformed_streams() {
        let plain = data(4, 20_000);
        let c = lz4(&plain);
        let mut seqs = Vec::new();
        assert!(parse(&c, plain.len() + 1, usize::MAX, &mut seqs).is_err());
        assert!(parse(&c, plain.len() - 1, usize::MAX, &mut seqs).is_err());
        assert!(parse(&c[..c.len() - 1], plain.len(), usize::MAX, &mut seqs).is_err());
        assert!(parse(&[], 0, usize::MAX, &mut seqs).is_err());
        // An offset reaching before the output's start.
        assert_eq!(
            parse(
                &[0x10, b'a', 0x05, 0x00, 0x50, 1, 2, 3, 4, 5],
                10,
                usize::MAX,
                &mut seqs
            ),
            Err(Malformed("match offset outside the output"))
        );
        // Every truncation and every single-byte change either fails to parse or parses to
        // a table whose reads agree with LZ4's own decoder on the changed stream.
        let mut work = Vec::new();
        for at in (0..c.len()).step_by(c.len() / 64 + 1) {
            let mut bad = c.clone();
            bad[at] ^= 0x5A;
            if parse(&bad, plain.len(), usize::MAX, &mut seqs).is_ok() {
                let mut want = vec![0u8; plain.len()];
                // SAFETY: `want` has room for plain.len() bytes.
                let n = unsafe {
                    lz4_sys::LZ4_decompress_safe(
                        bad.as_ptr().cast::<c_char>(),
                        want.as_mut_ptr().cast::<c_char>(),
                        bad.len() as c_int,
                        want.len() as c_int,
                    )
                };
                if n == plain.len() as c_int {
                    let mut out = vec![0u8; 500];
                    assert!(read(&bad, &seqs, 1234, &mut out, usize::MAX, &mut work));
                    assert_eq!(out, want[1234..1734]);
                }
            }
        }
    }

    #[test]
    fn a_small_budget_gives_up() {
        let plain = data(1, 70_000);
        let c = lz4(&plain);
        let mut seqs = Vec::new();
        parse(&c, plain.len(), usize::MAX, &mut seqs).unwrap();
        let mut out = vec![0u8; 100];
        let mut work = Vec::new();
        assert!(!read(&c, &seqs, 60_000, &mut out, 1, &mut work));
        assert!(read(
            &c,
            &seqs,
            60_000,
            &mut out,
            step_budget(100, 70_000),
            &mut work
        ));
        assert_eq!(out, plain[60_000..60_100]);
    }
}
