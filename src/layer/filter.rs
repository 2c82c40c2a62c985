//! Blocked Bloom filters: approximate membership for the values of a group of data chunks.
//!
//! A filter is an array of 512-bit blocks (one cache line each). A value's [`hash64`] `h`
//! picks block `((h >> 32) * nblocks) >> 32`, and sets or tests `k` bits of that block: with
//! `x_0 = h` and `x_{i+1} = x_i * 0x9e3779b97f4a7c15 + 0x632be59bd9b4e019 (mod 2^64)`, bit
//! `x_{i+1} >> 55` for `i < k`. (Double hashing, `a + i*b mod 512`, was measured at 2.6
//! times the predicted rate at 16 bits per value: its bit patterns are too correlated.) A "no" is always right; a "maybe" is wrong with a
//! probability that depends on the bits per value (see [`predicted_fpr`] and `spec/layer.md`).
//!
//! [`hash64`]: super::value::hash64
//!
//! Exact filters: for integer columns a filter chunk may instead hold the set of the block's
//! values as Roaring bitmaps (the portable Roaring format), which answers exactly. The writer
//! stores whichever of the two payloads is smaller (see [`choose`] and `spec/layer.md`); the
//! first four bytes tell them apart (`nblocks >= 1` for Bloom, `0` for exact).

use crate::column::LeafKind;
use crate::dtype::DType;
use roaring::RoaringBitmap;

/// Bits per filter block.
pub(crate) const BLOCK_BITS: u64 = 512;
const WORDS: usize = (BLOCK_BITS / 64) as usize;
/// Bytes before the blocks in a filter chunk payload: `u32 nblocks | u32 k | u64 nvalues`.
pub(crate) const FILTER_HEADER_LEN: usize = 16;

/// The false-positive rate of a blocked Bloom filter with `bits_per_value` bits per value
/// and `k` bits set per value: block loads are Poisson with mean `512 / bits_per_value`,
/// and a block holding `j` values answers "maybe" for an absent value with probability
/// `(1 - (1 - 1/512)^(k j))^k`.
pub(crate) fn predicted_fpr(bits_per_value: f64, k: u32) -> f64 {
    let lambda = BLOCK_BITS as f64 / bits_per_value.max(1.0);
    let miss = 1.0 - 1.0 / BLOCK_BITS as f64;
    let mut p = (-lambda).exp();
    let mut total = 0.0;
    let jmax = (lambda * 4.0 + 64.0) as u32;
    for j in 0..jmax {
        if j > 0 {
            p *= lambda / f64::from(j);
        }
        total += p * (1.0 - miss.powf(f64::from(k * j))).powi(k as i32);
    }
    total
}

/// The best number of bits set per value for `bits_per_value`, and the resulting rate.
pub(crate) fn best_hashes(bits_per_value: f64) -> (u32, f64) {
    (1..=24)
        .map(|k| (k, predicted_fpr(bits_per_value, k)))
        .fold(
            (1, f64::INFINITY),
            |best, c| if c.1 < best.1 { c } else { best },
        )
}

/// The smallest whole number of bits per value (from 2 to 64) whose predicted rate is at most
/// `fpr`, with its number of hashes and predicted rate.
pub(crate) fn params_for_fpr(fpr: f64) -> (u32, u32, f64) {
    let mut last = (64, 1, 1.0);
    for bpv in 2..=64u32 {
        let (k, p) = best_hashes(f64::from(bpv));
        last = (bpv, k, p);
        if p <= fpr {
            break;
        }
    }
    last
}

fn block_of(h: u64, nblocks: u64) -> usize {
    (((h >> 32) * nblocks) >> 32) as usize
}

fn bits(h: u64, k: u32) -> impl Iterator<Item = u64> {
    let mut x = h;
    (0..k).map(move |_| {
        x = x
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(0x632b_e59b_d9b4_e019);
        x >> 55
    })
}

/// Builds the payload of a filter chunk holding `hashes` with `bits_per_value` bits per value
/// and `k` bits per value set.
pub(crate) fn build(hashes: &[u64], bits_per_value: u32, k: u32) -> Vec<u8> {
    let n = hashes.len() as u64;
    let nblocks = (n * u64::from(bits_per_value)).div_ceil(BLOCK_BITS).max(1);
    let mut words = vec![0u64; nblocks as usize * WORDS];
    for &h in hashes {
        let base = block_of(h, nblocks) * WORDS;
        for bit in bits(h, k) {
            words[base + (bit / 64) as usize] |= 1 << (bit % 64);
        }
    }
    let mut out = Vec::with_capacity(FILTER_HEADER_LEN + words.len() * 8);
    out.extend_from_slice(&(nblocks as u32).to_le_bytes());
    out.extend_from_slice(&k.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out
}

/// A decoded filter chunk.
#[derive(Debug, Clone)]
pub(crate) struct Bloom {
    k: u32,
    words: Vec<u64>,
}

impl Bloom {
    /// Parses a filter chunk payload, checking its sizes.
    ///
    /// # Errors
    /// A description of the inconsistency (the caller names file and chunk).
    pub(crate) fn parse(p: &[u8]) -> Result<Bloom, String> {
        if p.len() < FILTER_HEADER_LEN {
            return Err(format!("filter payload of {} bytes is too short", p.len()));
        }
        let u32_at = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
        let nblocks = u64::from(u32_at(0));
        let k = u32_at(4);
        // Bytes 8..16 hold the number of values the filter was built from; lookups need
        // only the bits.
        if nblocks == 0 || !(1..=64).contains(&k) {
            return Err(format!("bad filter header: {nblocks} blocks, {k} hashes"));
        }
        let body = &p[FILTER_HEADER_LEN..];
        if body.len() as u64 != nblocks * BLOCK_BITS / 8 {
            return Err(format!(
                "filter of {nblocks} blocks needs {} bytes, payload has {}",
                nblocks * BLOCK_BITS / 8,
                body.len()
            ));
        }
        let words = body
            .chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_le_bytes(a)
            })
            .collect();
        Ok(Bloom { k, words })
    }

    /// False when no value with hash `h` was added; true when one may have been.
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        let nblocks = (self.words.len() / WORDS) as u64;
        let base = block_of(h, nblocks) * WORDS;
        bits(h, self.k).all(|bit| {
            self.words
                .get(base + (bit / 64) as usize)
                .is_some_and(|w| w & (1 << (bit % 64)) != 0)
        })
    }
}

/// The stored size of a Bloom filter payload for `n` values at `bits_per_value`.
pub(crate) fn bloom_len(n: u64, bits_per_value: u32) -> u64 {
    let nblocks = (n * u64::from(bits_per_value)).div_ceil(BLOCK_BITS).max(1);
    FILTER_HEADER_LEN as u64 + nblocks * BLOCK_BITS / 8
}

/// Bytes 0..4 of an exact filter payload (where a Bloom filter has `nblocks >= 1`).
const EXACT_MARK: u32 = 0;
/// Exact form 1: one 32-bit Roaring bitmap of `key - base`.
const FORM_BITMAP: u32 = 1;
/// Exact form 2: the 64-bit portable Roaring format ("treemap") of `key`.
const FORM_TREEMAP: u32 = 2;
/// Bytes before the Roaring bytes of an exact filter: `u32 0 | u32 form | u64 nkeys | u64 base`.
pub(crate) const EXACT_HEADER_LEN: usize = 24;

/// True for the value types an exact filter can hold: the integer dtypes.
pub(crate) fn exact_capable(kind: LeafKind) -> bool {
    matches!(kind, LeafKind::Fixed(d) if d.is_integer())
}

/// The key of an integer value in an exact filter, from its stored little-endian bytes:
/// unsigned values as they are, signed values sign-extended to 64 bits with bit 63 flipped
/// (`(x as u64) ^ 2^63`, which preserves order). `None` for other value types or a wrong
/// length.
pub(crate) fn exact_key(kind: LeafKind, b: &[u8]) -> Option<u64> {
    let LeafKind::Fixed(d) = kind else {
        return None;
    };
    let n = b.len();
    if n == 0 || n > 8 || n != d.itemsize() {
        return None;
    }
    let mut a = [0u8; 8];
    a[..n].copy_from_slice(b);
    let bits = 8 * n as u32;
    match d {
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => Some(u64::from_le_bytes(a)),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => {
            let x = (i64::from_le_bytes(a) << (64 - bits)) >> (64 - bits);
            Some((x as u64) ^ (1 << 63))
        }
        _ => None,
    }
}

/// Builds the payload of an exact filter holding `keys` (sorted and deduplicated in place).
pub(crate) fn build_exact(keys: &mut Vec<u64>) -> Vec<u8> {
    keys.sort_unstable();
    keys.dedup();
    let (first, last) = match (keys.first(), keys.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0, 0),
    };
    let mut out = Vec::with_capacity(EXACT_HEADER_LEN + 64);
    out.extend_from_slice(&EXACT_MARK.to_le_bytes());
    let small = last - first <= u64::from(u32::MAX);
    let form = if small { FORM_BITMAP } else { FORM_TREEMAP };
    out.extend_from_slice(&form.to_le_bytes());
    out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
    let base = if small { first } else { 0 };
    out.extend_from_slice(&base.to_le_bytes());
    // Serializing into a Vec cannot fail.
    if small {
        let mut bm: RoaringBitmap = keys.iter().map(|&k| (k - base) as u32).collect();
        bm.optimize();
        let _ = bm.serialize_into(&mut out);
    } else {
        let mut maps: Vec<(u32, RoaringBitmap)> = Vec::new();
        for &k in keys.iter() {
            let hi = (k >> 32) as u32;
            match maps.last_mut() {
                Some((h, bm)) if *h == hi => {
                    bm.insert(k as u32);
                }
                _ => maps.push((hi, std::iter::once(k as u32).collect())),
            }
        }
        out.extend_from_slice(&(maps.len() as u64).to_le_bytes());
        for (hi, mut bm) in maps {
            bm.optimize();
            out.extend_from_slice(&hi.to_le_bytes());
            let _ = bm.serialize_into(&mut out);
        }
    }
    out
}

/// Which payload a filter block gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Always Bloom.
    Bloom,
    /// Always exact.
    Exact,
    /// Exact when its payload is no larger than the Bloom filter's.
    Smaller,
}

/// The payload of one filter block: `hashes` of its values (for Bloom) and their `keys`
/// (integer columns; sorted and deduplicated in place), chosen by `choice`. Returns the
/// payload and whether it is exact.
pub(crate) fn choose(
    choice: Choice,
    hashes: &[u64],
    keys: &mut Vec<u64>,
    bits_per_value: u32,
    k: u32,
) -> (Vec<u8>, bool) {
    match choice {
        Choice::Bloom => (build(hashes, bits_per_value, k), false),
        Choice::Exact => (build_exact(keys), true),
        Choice::Smaller => {
            let e = build_exact(keys);
            if e.len() as u64 <= bloom_len(hashes.len() as u64, bits_per_value) {
                (e, true)
            } else {
                (build(hashes, bits_per_value, k), false)
            }
        }
    }
}

/// A decoded exact filter: 32-bit Roaring bitmaps by the high 32 bits of `key - base`.
#[derive(Debug, Clone)]
pub(crate) struct Exact {
    base: u64,
    maps: Vec<(u32, RoaringBitmap)>,
}

fn u32_at(p: &[u8], o: usize) -> Option<u32> {
    p.get(o..o + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn u64_at(p: &[u8], o: usize) -> Option<u64> {
    let b = p.get(o..o + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_le_bytes(a))
}

/// Reads one 32-bit Roaring bitmap from the front of `r`, advancing it. The header's
/// container count is checked against the bytes left before the Roaring reader sizes
/// anything by it, so a damaged header cannot make it allocate more than a few times the
/// payload.
fn read_bitmap(r: &mut &[u8]) -> Result<RoaringBitmap, String> {
    let left = r.len() as u64;
    let cookie = u32_at(r, 0).ok_or("truncated Roaring bitmap header")?;
    let need = if cookie == 12346 {
        let size = u64::from(u32_at(r, 4).ok_or("truncated Roaring bitmap header")?);
        if size > 65536 {
            return Err(format!(
                "Roaring bitmap of {size} containers (at most 65536)"
            ));
        }
        // cookie, count, then per container: description, offset, at least one value.
        8 + size * (4 + 4 + 2)
    } else if cookie & 0xffff == 12347 {
        let size = u64::from(cookie >> 16) + 1;
        let offsets = if size >= 4 { 4 * size } else { 0 };
        // cookie, run flags, descriptions, offsets, at least 2 bytes per container.
        4 + size.div_ceil(8) + 4 * size + offsets + 2 * size
    } else {
        return Err(format!("not a Roaring bitmap (cookie {cookie:#x})"));
    };
    if need > left {
        return Err(format!(
            "Roaring bitmap header needs at least {need} bytes, {left} left"
        ));
    }
    RoaringBitmap::deserialize_from(&mut *r).map_err(|e| format!("bad Roaring bitmap: {e}"))
}

impl Exact {
    /// Parses an exact filter payload (bytes 0..4 already known to be 0), checking every
    /// size against the payload and the key count against the bitmaps.
    fn parse(p: &[u8]) -> Result<Exact, String> {
        let short = || format!("exact filter payload of {} bytes is too short", p.len());
        let form = u32_at(p, 4).ok_or_else(short)?;
        let nkeys = u64_at(p, 8).ok_or_else(short)?;
        let base = u64_at(p, 16).ok_or_else(short)?;
        let mut r = p.get(EXACT_HEADER_LEN..).ok_or_else(short)?;
        let maps = match form {
            FORM_BITMAP => vec![(0, read_bitmap(&mut r)?)],
            FORM_TREEMAP => {
                if base != 0 {
                    return Err(format!("exact filter of form 2 with base {base}"));
                }
                let n = u64_at(r, 0).ok_or_else(short)?;
                r = &r[8..];
                // Each entry holds a key and a bitmap header of at least 8 bytes.
                if n > r.len() as u64 / 12 {
                    return Err(format!(
                        "exact filter claims {n} bitmaps in {} bytes",
                        r.len()
                    ));
                }
                let mut maps: Vec<(u32, RoaringBitmap)> = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let hi = u32_at(r, 0).ok_or_else(short)?;
                    r = &r[4..];
                    if maps.last().is_some_and(|(h, _)| *h >= hi) {
                        return Err("exact filter bitmaps are not in increasing key order".into());
                    }
                    maps.push((hi, read_bitmap(&mut r)?));
                }
                maps
            }
            other => return Err(format!("unknown exact filter form {other}")),
        };
        if !r.is_empty() {
            return Err(format!(
                "{} bytes after the exact filter's bitmaps",
                r.len()
            ));
        }
        let total: u64 = maps.iter().map(|(_, b)| b.len()).sum();
        if total != nkeys {
            return Err(format!(
                "exact filter header says {nkeys} keys, its bitmaps hold {total}"
            ));
        }
        Ok(Exact { base, maps })
    }

    /// Whether `key` was added.
    fn contains(&self, key: u64) -> bool {
        let Some(d) = key.checked_sub(self.base) else {
            return false;
        };
        let hi = (d >> 32) as u32;
        self.maps
            .binary_search_by_key(&hi, |(h, _)| *h)
            .ok()
            .and_then(|i| self.maps.get(i))
            .is_some_and(|(_, bm)| bm.contains(d as u32))
    }
}

/// A decoded filter chunk of either kind.
#[derive(Debug, Clone)]
pub(crate) enum BlockFilter {
    /// A blocked Bloom filter: "no" is certain, "yes" means maybe.
    Bloom(Bloom),
    /// The exact set of the block's keys.
    Exact(Exact),
}

impl BlockFilter {
    /// Parses a filter chunk payload of either kind, checking its sizes.
    ///
    /// # Errors
    /// A description of the inconsistency (the caller names file and chunk).
    pub(crate) fn parse(p: &[u8]) -> Result<BlockFilter, String> {
        if u32_at(p, 0) == Some(EXACT_MARK) {
            Exact::parse(p).map(BlockFilter::Exact)
        } else {
            Bloom::parse(p).map(BlockFilter::Bloom)
        }
    }

    /// True for an exact filter.
    pub(crate) fn is_exact(&self) -> bool {
        matches!(self, BlockFilter::Exact(_))
    }

    /// False when the value (its hash `h`, and its key for an integer column) was not
    /// added; true when it may have been (exact filters: when it was).
    pub(crate) fn may_contain(&self, h: u64, key: Option<u64>) -> bool {
        match (self, key) {
            (BlockFilter::Bloom(b), _) => b.may_contain(h),
            (BlockFilter::Exact(e), Some(k)) => e.contains(k),
            // An exact filter only exists for integer columns, whose values all have keys.
            (BlockFilter::Exact(_), None) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::value::mix;

    #[test]
    fn exact_forms_roundtrip_and_match_the_portable_format() {
        let mut keys: Vec<u64> = vec![5, 1 << 40, 3, u64::MAX, 0, 1 << 40, (1 << 40) + 7];
        let p = build_exact(&mut keys);
        assert_eq!(u32_at(&p, 4), Some(FORM_TREEMAP));
        // The crate's own 64-bit reader reads the same bytes.
        let t = roaring::RoaringTreemap::deserialize_from(&p[EXACT_HEADER_LEN..]).unwrap();
        assert_eq!(t.iter().collect::<Vec<_>>(), keys);
        let BlockFilter::Exact(e) = BlockFilter::parse(&p).unwrap() else {
            panic!("not exact")
        };
        for k in [0, 3, 5, 1 << 40, (1 << 40) + 7, u64::MAX] {
            assert!(e.contains(k));
        }
        for k in [1, 2, 4, 6, (1 << 40) + 1, u64::MAX - 1, 1 << 32] {
            assert!(!e.contains(k));
        }
        let mut dense: Vec<u64> = (1000..66536).collect();
        let p = build_exact(&mut dense);
        assert_eq!(u32_at(&p, 4), Some(FORM_BITMAP));
        assert_eq!(u64_at(&p, 16), Some(1000));
        // One run container: tiny.
        assert!(p.len() < 64, "{} bytes", p.len());
        let f = BlockFilter::parse(&p).unwrap();
        assert!(f.may_contain(0, Some(1000)) && f.may_contain(0, Some(66535)));
        assert!(!f.may_contain(0, Some(999)) && !f.may_contain(0, Some(66536)));
    }

    /// Every truncation of an exact payload is refused, and no damaged byte makes the
    /// parser panic or accept a payload whose sizes disagree.
    #[test]
    fn truncated_or_damaged_exact_payloads_are_errors_not_panics() {
        let mut sparse: Vec<u64> = (0..5000u64).map(|i| mix(i) >> 20).collect();
        let mut wide: Vec<u64> = (0..3000u64).map(mix).collect();
        let mut dense: Vec<u64> = (7..70_000u64).filter(|i| i % 11 != 0).collect();
        for keys in [&mut sparse, &mut wide, &mut dense] {
            let p = build_exact(keys);
            assert!(BlockFilter::parse(&p).is_ok());
            for n in 0..p.len() {
                assert!(BlockFilter::parse(&p[..n]).is_err(), "prefix of {n} bytes");
            }
            let mut longer = p.clone();
            longer.push(0);
            assert!(BlockFilter::parse(&longer).is_err());
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..4000 {
                x = mix(x);
                let mut q = p.clone();
                let at = (x % q.len() as u64) as usize;
                q[at] ^= (x >> 56) as u8 | 1;
                if let Ok(f) = BlockFilter::parse(&q) {
                    let _ = f.may_contain(x, Some(x >> 3));
                }
            }
        }
    }

    #[test]
    fn exact_keys_preserve_order() {
        let k = |d: DType, x: i64| exact_key(LeafKind::Fixed(d), &x.to_le_bytes()[..d.itemsize()]);
        assert!(k(DType::I8, -128) < k(DType::I8, -1));
        assert!(k(DType::I8, -1) < k(DType::I8, 0));
        assert_eq!(k(DType::I64, 0), Some(1 << 63));
        assert_eq!(k(DType::I16, -1), k(DType::I64, -1));
        assert_eq!(k(DType::U8, 255), Some(255));
        assert_eq!(exact_key(LeafKind::Fixed(DType::F64), &[0; 8]), None);
        assert_eq!(exact_key(LeafKind::VarStr, b"ab"), None);
    }

    #[test]
    fn no_false_negatives_and_rate_near_prediction() {
        let (bpv, k, p) = params_for_fpr(1e-2);
        assert!(p <= 1e-2);
        let hashes: Vec<u64> = (0..20_000u64).map(|i| mix(i * 2)).collect();
        let b = Bloom::parse(&build(&hashes, bpv, k)).unwrap();
        assert!(hashes.iter().all(|&h| b.may_contain(h)));
        let fp = (0..200_000u64)
            .filter(|i| b.may_contain(mix(i * 2 + 1)))
            .count() as f64
            / 200_000.0;
        assert!(fp < 2.0 * p, "measured {fp}, predicted {p}");
        assert!(Bloom::parse(&[0; 8]).is_err());
    }
}
