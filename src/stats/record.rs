//! The records of both kinds (statistics in `stats`, sums in `stats::sums`): strings of 25-byte
//! records in hex under a key of the `blz` object of a superchunk file's metadata document,
//! one per offsets slot (`spec/dataset.md` §14). One set of helpers reads and writes them.

/// Hex digits of one chunk's record, of either kind: 25 bytes (statistics: flags, min, max,
/// NaN count; sums: flags, count, int, float).
pub(crate) const RECORD_HEX: usize = 50;

/// The records (of either kind) of `n` chunks whose statistics or sums are unknown.
pub(crate) fn unknown_records(n: u64) -> String {
    "0".repeat(RECORD_HEX * n as usize)
}

/// A record's 25 bytes as 50 lowercase hex digits.
pub(crate) fn record_hex(b: &[u8; 25]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The 25 bytes of a record in hex; `None` when malformed.
pub(crate) fn record_bytes(hex: &str) -> Option<[u8; 25]> {
    if hex.len() != RECORD_HEX || !hex.is_ascii() {
        return None;
    }
    let mut b = [0u8; 25];
    for (i, x) in b.iter_mut().enumerate() {
        *x = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(b)
}

/// The little-endian `u64` at `b[at..at + 8]`.
pub(crate) fn le_word(b: &[u8; 25], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Record `j` of the records under `key` in a metadata document; `None` when it has none.
pub(crate) fn slot<'a>(doc: Option<&'a serde_json::Value>, key: &str, j: usize) -> Option<&'a str> {
    let s = doc?.get("blz")?.get(key)?.as_str()?;
    s.get(j * RECORD_HEX..(j + 1) * RECORD_HEX)
}

/// Replaces record `j` of the records under `key` in a metadata document; false if it holds
/// none (or too few).
pub(crate) fn set_slot(doc: &mut serde_json::Value, key: &str, j: u64, record: &str) -> bool {
    let Some(serde_json::Value::String(s)) = doc.get_mut("blz").and_then(|b| b.get_mut(key)) else {
        return false;
    };
    let at = j as usize * RECORD_HEX;
    if at + RECORD_HEX > s.len() || !s.is_char_boundary(at) || !s.is_char_boundary(at + RECORD_HEX)
    {
        return false;
    }
    s.replace_range(at..at + RECORD_HEX, record);
    true
}
