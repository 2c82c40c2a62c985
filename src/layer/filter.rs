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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::value::mix;

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
