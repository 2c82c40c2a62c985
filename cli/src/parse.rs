//! Values of command-line arguments: shapes, dtypes, `KEY=JSON` pairs, delimiters, and the
//! batch size of inputs.

use crate::failure::Failure;
use blz::DType;

/// Inputs are read, converted and appended, and selections read, this many bytes at a time
/// (the library's default batch), so memory stays bounded whatever the size of the data.
pub(crate) const BATCH_BYTES: u64 = blz::ordered::DEFAULT_BATCH_BYTES;

/// Parses `1000x20` (or `1000,20`, or `1000`).
pub(crate) fn parse_shape(s: &str, what: &str) -> Result<Vec<u64>, Failure> {
    s.split(['x', 'X', ','])
        .map(|p| {
            p.trim().parse::<u64>().map_err(|_| {
                Failure::new(format!(
                    "{what} {s:?}: expected extents separated by 'x', e.g. 1000x20"
                ))
            })
        })
        .collect()
}

/// Parses a dtype name (`float64`, `f8`, `S5`...).
pub(crate) fn parse_dtype(s: &str) -> Result<DType, Failure> {
    DType::parse_descr(s).map(|(d, _)| d).map_err(|_| {
        Failure::new(format!(
            "unknown dtype {s:?} (expected bool, int8..int64, uint8..uint64, float32, float64, \
             complex64, complex128, S<n> or U<n>)"
        ))
    })
}

/// Splits `KEY=JSON`.
pub(crate) fn parse_kv(s: &str, opt: &str) -> Result<(String, serde_json::Value), Failure> {
    let (k, v) = s.split_once('=').ok_or_else(|| {
        Failure::new(format!(
            "{opt} {s:?}: expected KEY=JSON, e.g. 'units=\"m\"'"
        ))
    })?;
    if k.is_empty() {
        return Err(Failure::new(format!("{opt} {s:?}: empty key")));
    }
    let value = serde_json::from_str::<serde_json::Value>(v).map_err(|e| {
        Failure::new(format!(
            "{opt} {s:?}: the value is not JSON ({e}); quote strings, e.g. '{k}=\"{v}\"'"
        ))
    })?;
    // An integer past 64 bits would silently become a float: refused.
    let value = blz::meta::parse_json_exact(v)
        .map(|_| value)
        .map_err(|e| match e {
            blz::Error::InvalidArgument(m) => Failure::new(format!("{opt} {s:?}: {m}")),
            e => Failure::new(format!("{opt} {s:?}: {e}")),
        })?;
    Ok((k.to_string(), value))
}

/// Bytes read, converted and encoded at a time: [`BATCH_BYTES`], or `BLZ_BATCH_BYTES` when
/// set (tests make it small so that a kill lands between batches, as in a large input).
pub(crate) fn batch_bytes() -> u64 {
    std::env::var("BLZ_BATCH_BYTES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&b| b > 0)
        .unwrap_or(BATCH_BYTES)
}

/// The byte of a `--delimiter`.
pub(crate) fn delimiter_byte(delimiter: char) -> Result<u8, Failure> {
    u8::try_from(delimiter)
        .ok()
        .filter(u8::is_ascii)
        .ok_or_else(|| {
            Failure::new(format!(
                "--delimiter {delimiter:?}: use a single ASCII character"
            ))
        })
}
