//! The JSON files of a bcolz carray (`meta/sizes`, `meta/storage`, `__attrs__`) and ctable
//! (`__rootdirs__`), and the mapping of bcolz's numpy dtype strings and compression
//! parameters onto blz's.
//!
//! Everything here is untrusted input: every key is checked for presence and type, every
//! number for range, before anything is sized from it.

use crate::blosc::{Codec, MAX_BUFFERSIZE};
use crate::dtype::{value_to_bytes, DType, Endianness};
use crate::error::{Error, Result};
use crate::meta::{Compression, FilterName};
use serde_json::{Map, Value};
use std::path::Path;

/// Largest bcolz JSON file blz reads (bcolz writes a few hundred bytes; attributes may be
/// larger, but not this large).
pub(crate) const MAX_JSON_FILE: u64 = 16 << 20;
/// Most axes a bcolz carray may have (numpy's own limit is 64).
pub(crate) const MAX_RANK: usize = 32;

/// bcolz's compression parameters (`cparams` in `meta/storage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cparams {
    /// Compression level 0-9.
    pub clevel: u8,
    /// 0 no shuffle, 1 byte shuffle, 2 bit shuffle.
    pub shuffle: u8,
    /// The Blosc compressor name (`blosclz` when the file predates the key).
    pub cname: String,
    /// Significant decimal digits kept by bcolz's lossy float quantization (0: off). The
    /// stored chunks already hold the quantized values.
    pub quantize: i64,
}

impl Cparams {
    /// The blz compression settings with the same codec, level and shuffle.
    ///
    /// # Errors
    /// [`Error::Unsupported`] (naming `path`) for a compressor blz does not build (snappy).
    pub fn to_compression(&self, path: &Path) -> Result<Compression> {
        let codec: Codec = self.cname.parse().map_err(|_| {
            Error::unsupported(
                path,
                format!(
                    "compressor {:?}: blz reads blosclz, lz4, lz4hc, zlib and zstd chunks",
                    self.cname
                ),
            )
        })?;
        let filters = match self.shuffle {
            1 => vec![FilterName::Shuffle],
            2 => vec![FilterName::Bitshuffle],
            _ => vec![],
        };
        Ok(Compression {
            codec,
            clevel: self.clevel,
            filters,
            mantissa_bits: None,
            blocksize: 0,
        })
    }
}

/// Everything blz takes from a bcolz carray's `meta/sizes` and `meta/storage`.
#[derive(Debug, Clone, PartialEq)]
pub struct CarrayMeta {
    /// The committed shape (`meta/sizes` key `shape`): axis 0 is the length.
    pub shape: Vec<u64>,
    /// The element type.
    pub dtype: DType,
    /// Byte order of the stored elements.
    pub endianness: Endianness,
    /// The dtype string exactly as bcolz stored it.
    pub numpy_dtype: String,
    /// Rows (positions along axis 0) per chunk.
    pub chunklen: u64,
    /// Compression parameters.
    pub cparams: Cparams,
    /// The length bcolz was told to expect, if stored.
    pub expectedlen: Option<u64>,
    /// The default (fill) value as JSON, in the form blz's fill values take (non-finite
    /// floats as `"nan"`, `"inf"`, `"-inf"`).
    pub dflt: Value,
}

impl CarrayMeta {
    /// Bytes of one row (one position along axis 0): the itemsize times the other axes.
    pub fn row_bytes(&self) -> u64 {
        self.shape[1..].iter().product::<u64>() * self.dtype.itemsize() as u64
    }

    /// Uncompressed bytes of a full chunk.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunklen * self.row_bytes()
    }

    /// Number of rows.
    pub fn len(&self) -> u64 {
        self.shape[0]
    }

    /// True when the carray has no rows.
    pub fn is_empty(&self) -> bool {
        self.shape[0] == 0
    }

    /// Number of chunk files holding the committed rows: the full chunks, plus one for the
    /// leftover rows when the length is not a multiple of `chunklen`.
    pub fn nchunks(&self) -> u64 {
        self.shape[0].div_ceil(self.chunklen)
    }

    /// Rows of chunk `i` that belong to the carray.
    pub fn chunk_rows(&self, i: u64) -> u64 {
        let start = i.saturating_mul(self.chunklen);
        self.shape[0].saturating_sub(start).min(self.chunklen)
    }
}

/// Reads a bcolz JSON file. Python's `json` module writes non-finite floats as the bare
/// tokens `NaN`, `Infinity` and `-Infinity`, which strict JSON lacks; they are read as the
/// strings `"nan"`, `"inf"` and `"-inf"`.
///
/// # Errors
/// [`Error::InvalidMetadata`] naming the file when it is missing, too large or not JSON.
pub(crate) fn read_json(path: &Path) -> Result<Value> {
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::metadata(path, "file is missing"))
        }
        Err(e) => return Err(Error::io("stat", path, e)),
    };
    if len > MAX_JSON_FILE {
        return Err(Error::metadata(
            path,
            format!("{len} bytes, more than the {MAX_JSON_FILE} blz reads"),
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
    let text = python_json_to_strict(&bytes);
    serde_json::from_slice(&text).map_err(|e| Error::metadata(path, format!("not JSON: {e}")))
}

/// Replaces the bare tokens `NaN`, `Infinity`, `-Infinity` outside strings by quoted ones.
fn python_json_to_strict(b: &[u8]) -> Vec<u8> {
    const TOKENS: [(&[u8], &[u8]); 3] = [
        (b"-Infinity", b"\"-inf\""),
        (b"Infinity", b"\"inf\""),
        (b"NaN", b"\"nan\""),
    ];
    let mut out = Vec::with_capacity(b.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    'scan: while let Some(&c) = b.get(i) {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
        } else if c == b'"' {
            in_string = true;
        } else {
            for (token, quoted) in TOKENS {
                if b.get(i..i + token.len()) == Some(token) {
                    out.extend_from_slice(quoted);
                    i += token.len();
                    continue 'scan;
                }
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

fn object<'a>(v: &'a Value, path: &Path) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| Error::metadata(path, "expected a JSON object"))
}

fn key<'a>(m: &'a Map<String, Value>, k: &str, path: &Path) -> Result<&'a Value> {
    m.get(k)
        .ok_or_else(|| Error::metadata(path, format!("missing key {k:?}")))
}

fn uint(v: &Value, what: &str, path: &Path) -> Result<u64> {
    v.as_u64().ok_or_else(|| {
        Error::metadata(
            path,
            format!("{what} is {v}, expected a non-negative integer"),
        )
    })
}

/// Parses `meta/sizes`: returns the shape (only `shape` is used: bcolz recomputes `nbytes`
/// and `cbytes` itself).
///
/// # Errors
/// [`Error::InvalidMetadata`] naming the file.
pub(crate) fn parse_sizes(v: &Value, path: &Path) -> Result<Vec<u64>> {
    let m = object(v, path)?;
    let shape = key(m, "shape", path)?
        .as_array()
        .ok_or_else(|| Error::metadata(path, "\"shape\" is not a list"))?;
    if shape.is_empty() || shape.len() > MAX_RANK {
        return Err(Error::metadata(
            path,
            format!(
                "\"shape\" has {} axes (1..={MAX_RANK} expected)",
                shape.len()
            ),
        ));
    }
    shape
        .iter()
        .enumerate()
        .map(|(i, n)| uint(n, &format!("shape[{i}]"), path))
        .collect()
}

/// Maps a numpy dtype string as bcolz stores it (`str(dtype)`: `int32`, `float64`, `bool`,
/// `|S8`, `<U5`, `>i4`...) to a blz dtype and byte order. A name without a byte-order mark
/// (numpy's names for native types) is read as little-endian, the order of every machine
/// bcolz was built for.
///
/// # Errors
/// [`Error::Unsupported`] naming `path` for dtypes blz has no equivalent of (object,
/// structured, generic or multiple-unit datetime64...). bcolz stores `float16`,
/// `datetime64[unit]` and `timedelta64[unit]` columns as numpy does: blz reads them as its
/// own types of the same names.
pub(crate) fn parse_dtype(s: &str, path: &Path) -> Result<(DType, Endianness)> {
    let why = match s {
        "object" | "O" | "|O" => Some("object dtype (pickled Python objects)"),
        _ if s.starts_with('[') || s.starts_with('(') || s.contains('V') => {
            Some("structured or void dtype")
        }
        _ => None,
    };
    let unsupported = |why: &str| {
        Error::unsupported(
            path,
            format!(
                "bcolz dtype {s:?}: {why} has no blz equivalent (blz holds bool, int8..int64, \
                 uint8..uint64, float16..float64, complex64, complex128, S<n>, U<n>, \
                 datetime64[unit] and timedelta64[unit])"
            ),
        )
    };
    if let Some(why) = why {
        return Err(unsupported(why));
    }
    match DType::parse_descr(s) {
        Ok((dtype, endian)) => Ok((dtype, endian.unwrap_or(Endianness::Little))),
        Err(_) => Err(unsupported("this dtype")),
    }
}

/// Parses `meta/storage` together with the shape from `meta/sizes`.
///
/// # Errors
/// [`Error::InvalidMetadata`] naming the file for missing keys or values out of range;
/// [`Error::Unsupported`] for a dtype or compressor blz cannot handle.
pub(crate) fn parse_storage(v: &Value, shape: Vec<u64>, path: &Path) -> Result<CarrayMeta> {
    let m = object(v, path)?;
    let numpy_dtype = key(m, "dtype", path)?
        .as_str()
        .ok_or_else(|| Error::metadata(path, "\"dtype\" is not a string"))?
        .to_string();
    let (dtype, endianness) = parse_dtype(&numpy_dtype, path)?;
    let chunklen = uint(key(m, "chunklen", path)?, "\"chunklen\"", path)?;
    if chunklen == 0 {
        return Err(Error::metadata(path, "\"chunklen\" is 0"));
    }
    if shape[1..].contains(&0) {
        return Err(Error::unsupported(
            path,
            format!("shape {shape:?}: blz allows an empty axis 0 only"),
        ));
    }
    let row_bytes = shape[1..]
        .iter()
        .try_fold(dtype.itemsize() as u64, |a, &n| a.checked_mul(n));
    match row_bytes.and_then(|r| r.checked_mul(chunklen)) {
        Some(b) if b <= MAX_BUFFERSIZE as u64 => {}
        _ => {
            return Err(Error::metadata(
                path,
                format!(
                    "chunks of {chunklen} rows of shape {:?} and dtype {numpy_dtype} exceed \
                     Blosc's {MAX_BUFFERSIZE}-byte limit",
                    &shape[1..]
                ),
            ))
        }
    }
    let cp = object(key(m, "cparams", path)?, path)?;
    let clevel = uint(key(cp, "clevel", path)?, "cparams.clevel", path)?;
    if clevel > 9 {
        return Err(Error::metadata(
            path,
            format!("cparams.clevel {clevel} out of range 0-9"),
        ));
    }
    let shuffle = uint(key(cp, "shuffle", path)?, "cparams.shuffle", path)?;
    if shuffle > 2 {
        return Err(Error::metadata(
            path,
            format!("cparams.shuffle {shuffle} (0, 1 or 2 expected)"),
        ));
    }
    let cname = match cp.get("cname") {
        None => "blosclz".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(Error::metadata(
                path,
                format!("cparams.cname is {other}, expected a string"),
            ))
        }
    };
    let quantize = match cp.get("quantize") {
        None | Some(Value::Null) => 0,
        Some(q) => q.as_i64().ok_or_else(|| {
            Error::metadata(
                path,
                format!("cparams.quantize is {q}, expected an integer"),
            )
        })?,
    };
    let cparams = Cparams {
        clevel: clevel as u8,
        shuffle: shuffle as u8,
        cname,
        quantize,
    };
    // Chunks of a compressor blz lacks cannot be decoded: say so before reading any.
    cparams.to_compression(path)?;
    let expectedlen = match m.get("expectedlen") {
        None | Some(Value::Null) => None,
        Some(e) => Some(uint(e, "\"expectedlen\"", path)?),
    };
    let dflt = m.get("dflt").cloned().unwrap_or(Value::Null);
    value_to_bytes(&dflt, dtype, Endianness::native()).map_err(|_| {
        Error::metadata(
            path,
            format!("\"dflt\" {dflt} is not a value of dtype {numpy_dtype}"),
        )
    })?;
    Ok(CarrayMeta {
        shape,
        dtype,
        endianness,
        numpy_dtype,
        chunklen,
        cparams,
        expectedlen,
        dflt,
    })
}

/// Parses `__attrs__` (a JSON object of user attributes); a missing file is no attributes,
/// as in bcolz.
///
/// # Errors
/// [`Error::InvalidMetadata`] naming the file when it is not a JSON object.
pub(crate) fn read_attrs(path: &Path) -> Result<Map<String, Value>> {
    if !path.exists() {
        return Ok(Map::new());
    }
    let v = read_json(path)?;
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(Error::metadata(path, "expected a JSON object")),
    }
}

/// Parses a ctable's `__rootdirs__` (`{"names": [...]}`): the column names in order, each
/// also the name of the column's directory.
///
/// # Errors
/// [`Error::InvalidMetadata`] naming the file for no columns, a duplicate, or a name that is
/// not a plain directory name.
pub(crate) fn parse_rootdirs(v: &Value, path: &Path) -> Result<Vec<String>> {
    let m = object(v, path)?;
    let names = key(m, "names", path)?
        .as_array()
        .ok_or_else(|| Error::metadata(path, "\"names\" is not a list"))?;
    if names.is_empty() {
        return Err(Error::metadata(path, "the ctable has no columns"));
    }
    let mut out: Vec<String> = Vec::with_capacity(names.len().min(4096));
    for n in names {
        let s = n
            .as_str()
            .ok_or_else(|| Error::metadata(path, format!("column name {n} is not a string")))?;
        let plain = !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\', '\0']);
        if !plain {
            return Err(Error::metadata(
                path,
                format!("column name {s:?} is not a plain directory name"),
            ));
        }
        if out.iter().any(|o| o == s) {
            return Err(Error::metadata(path, format!("column {s:?} listed twice")));
        }
        out.push(s.to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_non_finite_tokens_become_strings_outside_strings_only() {
        let got = python_json_to_strict(
            br#"{"a": NaN, "b": [Infinity, -Infinity], "c": "NaN \"Infinity\"", "d": 1}"#,
        );
        let v: Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(v["a"], "nan");
        assert_eq!(v["b"][0], "inf");
        assert_eq!(v["b"][1], "-inf");
        assert_eq!(v["c"], "NaN \"Infinity\"");
        assert_eq!(v["d"], 1);
    }

    #[test]
    fn numpy_dtype_strings() {
        let p = Path::new("x");
        let le = Endianness::Little;
        assert_eq!(parse_dtype("int32", p).unwrap(), (DType::I32, le));
        assert_eq!(parse_dtype("bool", p).unwrap(), (DType::Bool, le));
        assert_eq!(parse_dtype("|S8", p).unwrap(), (DType::Bytes(8), le));
        assert_eq!(parse_dtype("<U5", p).unwrap(), (DType::Str(5), le));
        assert_eq!(
            parse_dtype(">i4", p).unwrap(),
            (DType::I32, Endianness::Big)
        );
        // bcolz's str(dtype) of numpy's float16, datetime64 and timedelta64.
        assert_eq!(parse_dtype("float16", p).unwrap(), (DType::F16, le));
        assert_eq!(
            parse_dtype("datetime64[ns]", p).unwrap(),
            (DType::DateTime(crate::dtype::TimeUnit::Nanosecond), le)
        );
        assert_eq!(
            parse_dtype(">m8[D]", p).unwrap(),
            (
                DType::TimeDelta(crate::dtype::TimeUnit::Day),
                Endianness::Big
            )
        );
        for bad in [
            "object",
            "datetime64",
            "<M8[5s]",
            "|V8",
            "[('a', '<i4')]",
            "|S0",
        ] {
            assert!(
                matches!(parse_dtype(bad, p), Err(Error::Unsupported { .. })),
                "{bad}"
            );
        }
    }
}
