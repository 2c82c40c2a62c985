//! The offsets digest: a SHA-256 over a file's offsets table that blz keeps in the file's
//! metadata document, under `{"blz": {"offsets": "<64 hex digits>"}}`, so that a chunk read
//! through slot `k` is the chunk written as chunk `k`, not another valid chunk of the file
//! whose position a damaged or permuted table holds there (`spec/blpk.md`, "Offsets digest").
//!
//! The digest covers the first `nchunks` slots (8 bytes each, little-endian, as stored) and
//! then `nchunks` itself (8 bytes, little-endian). It is written as 64 lowercase hex digits,
//! so the document keeps its length when the digest changes and the metadata section can be
//! rewritten in place.

use sha2::{Digest as _, Sha256};

/// The key of blz's object in a superchunk file's metadata document.
pub(crate) const BLZ_KEY: &str = "blz";
/// The key of the offsets digest inside blz's object.
pub const OFFSETS_KEY: &str = "offsets";
/// How a [`ChecksumMismatch`](crate::Error::ChecksumMismatch) of a chunk names the offsets
/// digest, when the table that places the chunk does not match it.
pub const OFFSETS_ALGORITHM: &str = "sha256 of the offsets table, which places the chunk";

/// The offsets digest computed slot by slot: appending a chunk extends it without hashing
/// the table again.
#[derive(Clone, Default)]
pub(crate) struct OffsetsHasher {
    sha: Sha256,
    n: u64,
}

impl OffsetsHasher {
    /// Slots hashed so far.
    pub(crate) fn len(&self) -> u64 {
        self.n
    }

    /// Hashes the next slot.
    pub(crate) fn push(&mut self, offset: u64) {
        self.sha.update(offset.to_le_bytes());
        self.n += 1;
    }

    /// The digest of the slots hashed so far, as the table of that many chunks.
    pub(crate) fn digest(&self) -> String {
        let mut sha = self.sha.clone();
        sha.update(self.n.to_le_bytes());
        super::checksum::hex(&sha.finalize())
    }
}

impl std::fmt::Debug for OffsetsHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetsHasher")
            .field("slots", &self.n)
            .finish()
    }
}

/// The offsets digest of a table whose first `offsets.len()` slots hold `offsets`.
pub fn offsets_digest(offsets: &[u64]) -> String {
    let mut h = OffsetsHasher::default();
    for &o in offsets {
        h.push(o);
    }
    h.digest()
}

/// The offsets digest a metadata document records, if it carries the key (whatever the value).
pub(crate) fn stored_digest(doc: &serde_json::Value) -> Option<&serde_json::Value> {
    doc.get(BLZ_KEY)?.get(OFFSETS_KEY)
}

/// Records `digest` in a document that carries the key; false when it does not.
pub(crate) fn set_digest(doc: &mut serde_json::Value, digest: String) -> bool {
    match doc.get_mut(BLZ_KEY).and_then(|b| b.get_mut(OFFSETS_KEY)) {
        Some(v) => {
            *v = serde_json::Value::String(digest);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_sha256_of_the_slots_then_the_count() {
        // Independently: SHA-256 of the 8-byte little-endian slots followed by the count.
        let offsets = [100u64, 300, 200];
        let mut bytes = Vec::new();
        for o in offsets {
            bytes.extend_from_slice(&o.to_le_bytes());
        }
        bytes.extend_from_slice(&3u64.to_le_bytes());
        let want = crate::blpk::hex(&Sha256::digest(&bytes));
        assert_eq!(offsets_digest(&offsets), want);
        // SHA-256: 32 bytes, 64 hex digits.
        assert_eq!(want.len(), 64);
        // Order and count matter.
        assert_ne!(offsets_digest(&[300, 100, 200]), want);
        assert_ne!(
            offsets_digest(&[100, 300]),
            offsets_digest(&[100, 300, 200])
        );
        // The empty table (a new file), as Python's hashlib gives it.
        assert_eq!(
            offsets_digest(&[]),
            "af5570f5a1810b7af78caf4bc70a660f0df51e42baf91d4de5b2328de0e83dfc"
        );
    }

    #[test]
    fn incremental_equals_whole() {
        let mut h = OffsetsHasher::default();
        let mut seen = Vec::new();
        for o in [64u64, 1000, 5000, 70] {
            h.push(o);
            seen.push(o);
            assert_eq!(h.digest(), offsets_digest(&seen));
        }
        assert_eq!(h.len(), 4);
    }
}
