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

/// Parses a size such as `4096`, `256K`, `1M`, `1.5M` or `2GiB`. Suffixes `B`, `K`, `M`, `G`
/// and `T` (case-insensitive, optionally followed by `B` or `iB`) are powers of 1024, as in
/// bloscpack.
///
/// # Errors
/// [`blz::Error::InvalidArgument`] for an empty, negative, malformed or too large size.
pub(crate) fn parse_size(s: &str) -> blz::Result<u64> {
    let bad = |why: &str| blz::Error::InvalidArgument(format!("bad size {s:?}: {why}"));
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(bad("expected a number such as 4096, 256K or 1M"));
    }
    let suffix = suffix.trim().to_ascii_uppercase();
    let unit = suffix
        .strip_suffix("IB")
        .or_else(|| suffix.strip_suffix('B').filter(|u| !u.is_empty()))
        .unwrap_or(&suffix);
    let mult: u64 = match unit {
        "" | "B" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(bad("unknown suffix (use B, K, M, G or T)")),
    };
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult).ok_or_else(|| bad("too large"));
    }
    let x: f64 = num
        .parse()
        .map_err(|_| bad("expected a number such as 4096, 256K or 1M"))?;
    let v = x * mult as f64;
    if !v.is_finite() || v >= u64::MAX as f64 {
        return Err(bad("too large"));
    }
    if v.fract() != 0.0 {
        return Err(bad("not a whole number of bytes"));
    }
    Ok(v as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("256K").unwrap(), 256 * 1024);
        assert_eq!(parse_size("256k").unwrap(), 256 * 1024);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("1MB").unwrap(), 1 << 20);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("1.5M").unwrap(), 3 << 19);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("10B").unwrap(), 10);
        assert_eq!(parse_size("0").unwrap(), 0);
        for bad in [
            "",
            "M",
            "-1",
            "1X",
            "1.3B",
            "abc",
            "1e3",
            "99999999999T",
            "1..2K",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
